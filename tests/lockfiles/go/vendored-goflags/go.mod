module example.com/offline

go 1.20

require github.com/BurntSushi/toml v1.4.0

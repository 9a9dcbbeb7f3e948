module example.com/cli

go 1.22.3

require github.com/spf13/cobra v1.8.1

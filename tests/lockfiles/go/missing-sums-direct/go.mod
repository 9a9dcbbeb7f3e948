module example.com/tool

go 1.22

require (
	github.com/fatih/color v1.17.0
	gopkg.in/yaml.v3 v3.0.1
)

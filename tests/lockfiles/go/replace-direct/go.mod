module example.com/service

go 1.21

require (
	bitbucket.org/old-team/parser v1.4.0
	example.com/service/shared v0.0.0
	github.com/pkg/errors v0.9.1
)

replace (
	// Our fork, until upstream merges the fix.
	bitbucket.org/old-team/parser v1.4.0 => gitlab.corp.example/forks/parser v1.4.1-fix.1
	example.com/service/shared => ../shared
)

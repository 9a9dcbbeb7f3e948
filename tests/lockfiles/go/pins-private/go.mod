module git.corp.example/platform/api

go 1.22

require (
	git.corp.example/platform/authz v0.8.2
	github.com/rs/zerolog v1.33.0
	metrics.internal.example/go/metrics v1.2.0
)

module example.com/broken

go 1.22

require (
	github.com/pkg/errors v0.9.1
	github.com/google/uuid
)

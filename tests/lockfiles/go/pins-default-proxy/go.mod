module example.com/webapp

go 1.22

require (
	github.com/go-chi/chi/v5 v5.0.12
	golang.org/x/text v0.16.0
)

require github.com/google/uuid v1.6.0 // indirect

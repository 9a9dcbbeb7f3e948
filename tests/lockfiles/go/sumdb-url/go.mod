module example.com/batch

go 1.22

require (
	github.com/robfig/cron/v3 v3.0.1
	go.uber.org/zap v1.27.0
)

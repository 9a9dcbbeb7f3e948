module git.corp.example/payments/ledger

go 1.21

require (
	github.com/jackc/pgx/v5 v5.6.0
	github.com/shopspring/decimal v1.4.0
)

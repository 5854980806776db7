package main

import "github.com/jackc/pgx/v5"

// pgxTx is the transaction type of River's pgx driver.
type pgxTx = pgx.Tx

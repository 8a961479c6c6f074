package serve

import "time"

// MigratePGLedger creates or migrates the ledger schema of the database at
// dsn up to version (CreatePGLedger stops at none but the last): the tests
// make a database of an older schema with it.
func MigratePGLedger(dsn string, version int) ([]int, error) {
	o := DefaultPGOptions()
	o.Timeout = 30 * time.Second
	return migratePG(dsn, o, version)
}

// PGSchemaVersion is the schema version this build serves.
var PGSchemaVersion = pgSchemaVersion

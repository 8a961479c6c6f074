package pgledger

// The schema of the PostgreSQL ledger (docs/serving.md, "The PostgreSQL
// ledger"), created and migrated only by Create (`nvdp serve ledger
// init --ledger postgres://...`), never by a server: a server refuses a
// database whose nvdp.schema_version is missing or not pgSchemaVersion, so
// that an empty or wrong database can never reset budgets.

import "time"

// Format is the format of a PostgreSQL ledger, as GET /v1/info shows it.
const Format = "nvdp-ledger-postgres/1"

// pgSchema is the PostgreSQL schema that holds the ledger's tables.
const pgSchema = "nvdp"

// pgMigration takes the schema from Version-1 to Version.
type pgMigration struct {
	Version     int
	Description string
	SQL         string
}

// pgMigrations are the schema's versions in order; pgSchemaVersion is the
// last, the one a server needs.
var pgMigrations = []pgMigration{{
	Version:     1,
	Description: "ledger, curves, models, accounts, account_releases, charges, keys",
	SQL: `
CREATE TABLE nvdp.ledger (
	singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
	ledger_id   text NOT NULL,
	format      text NOT NULL,
	created     timestamptz NOT NULL,
	orders      double precision[],
	delta       double precision
);
CREATE TABLE nvdp.curves (
	id             text PRIMARY KEY,
	accountant     text NOT NULL,
	format_version integer NOT NULL,
	orders         double precision[] NOT NULL,
	rd             double precision[] NOT NULL,
	delta          double precision NOT NULL,
	registered     timestamptz NOT NULL
);
CREATE TABLE nvdp.models (
	id          text PRIMARY KEY,
	description jsonb NOT NULL,
	curve       text NOT NULL REFERENCES nvdp.curves (id),
	registered  timestamptz NOT NULL
);
CREATE TABLE nvdp.accounts (
	id       text PRIMARY KEY,
	requests bigint NOT NULL DEFAULT 0 CHECK (requests >= 0),
	updated  timestamptz NOT NULL
);
CREATE TABLE nvdp.account_releases (
	account  text NOT NULL REFERENCES nvdp.accounts (id),
	curve    text NOT NULL REFERENCES nvdp.curves (id),
	releases bigint NOT NULL CHECK (releases >= 0),
	PRIMARY KEY (account, curve)
);
CREATE TABLE nvdp.charges (
	id       bigserial PRIMARY KEY,
	at       timestamptz NOT NULL,
	account  text NOT NULL REFERENCES nvdp.accounts (id),
	releases integer NOT NULL CHECK (releases > 0),
	curve    text NOT NULL REFERENCES nvdp.curves (id),
	model    text REFERENCES nvdp.models (id),
	replica  text NOT NULL
);
CREATE INDEX charges_by_account ON nvdp.charges (account, id);
CREATE TABLE nvdp.keys (
	id             text PRIMARY KEY,
	hash           bytea NOT NULL UNIQUE CHECK (length(hash) = 32),
	budget_epsilon double precision NOT NULL CHECK (budget_epsilon >= 0),
	labels         jsonb NOT NULL DEFAULT '{}',
	created        timestamptz NOT NULL,
	rotated        timestamptz,
	revoked        timestamptz
);
`,
}, {
	Version:     2,
	Description: "curves.gaussian_mu: the mu of one release of a Gaussian curve (exact ledger.Grid)",
	// NULL for an RDP curve: every curve of version 1 is one, and stays one
	// (its ID covers no mu).
	SQL: `
ALTER TABLE nvdp.curves ADD COLUMN gaussian_mu double precision;
`,
}, {
	Version:     3,
	Description: "curves.accountant in privacy's names: rdp-sum -> rdp, gaussian-mu -> analytic-gaussian",
	// The names a certificate and a balance carry (legacyAccountant); the
	// curves' IDs do not cover the name, so no ID changes.
	SQL: `
UPDATE nvdp.curves SET accountant = 'rdp' WHERE accountant = 'rdp-sum';
UPDATE nvdp.curves SET accountant = 'analytic-gaussian' WHERE accountant = 'gaussian-mu';
`,
}}

// pgSchemaVersion is the schema version this build serves.
var pgSchemaVersion = pgMigrations[len(pgMigrations)-1].Version

// pgVersionTable creates the version table, the first thing init makes.
const pgVersionTable = `
CREATE SCHEMA nvdp;
CREATE TABLE nvdp.schema_version (
	version     integer PRIMARY KEY,
	description text NOT NULL,
	applied     timestamptz NOT NULL
);`

// pgInitLock is the advisory lock that serialises inits of one database.
const pgInitLock = 0x6e76647031 // "nvdp1"

// SchemaVersion is the schema version this build serves.
var SchemaVersion = pgSchemaVersion

// Migrate creates or migrates the ledger schema of the database at dsn up
// to version, at most SchemaVersion, while [Create] goes to the last. It
// serves a database of an older schema, as the tests of migrations make, or
// an upgrade staged one version at a time. It returns the versions applied.
// Errors: as Create's.
func Migrate(dsn string, version int) ([]int, error) {
	o := DefaultOptions()
	o.Timeout = 30 * time.Second
	return migratePG(dsn, o, min(version, pgSchemaVersion))
}

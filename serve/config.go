package serve

import (
	"log/slog"
	"os"

	"github.com/nvdp-project/nvdp/ledger"
	"github.com/nvdp-project/nvdp/option"
)

// Config says where a server finds its model, its ledger and its keys: the
// inputs of a serving process besides its [Options], checked by
// [Config.Check] before anything is opened. Errors name an input by its
// JSON key, as [*option.Error] does.
type Config struct {
	// Model is the model directory (required).
	Model string `json:"model"`
	// Ledger is the ledger's location (required): a file, or a database
	// (pgledger.IsPostgres).
	Ledger string `json:"ledger"`
	// LedgerHoldsKeys says whether Ledger names a ledger that holds API
	// keys (a PostgreSQL database, whose ledger is a [KeySource]); a file
	// does not.
	LedgerHoldsKeys bool `json:"-"`
	// Keys is the keys file ([ReadKeys]); "": none.
	Keys string `json:"keys"`
	// KeysInLedger authenticates against the keys of the ledger instead of
	// a keys file. Each key there has its own budget, so Options'
	// BudgetEpsilon must be left unset (Auto).
	KeysInLedger bool `json:"keys_in_ledger"`
}

// Check checks o with [Options.Validate] and [Options.CheckFiles], then c's
// inputs and how they combine with o, and reads the keys file: it returns
// its keys, or nil without one. The budgets of the keys are checked against
// o by [Options.Budgets] unless the keys are the ledger's. It opens no
// ledger and no model.
//
// Errors: those of o's checks. An [*option.Error] names keys for a keys
// file that does not read or check, and budget_epsilon for a budget given
// with the ledger's keys or an account left without one; it also reports a
// missing model or ledger. An [*option.CombinationError] reports a keys
// file with the ledger's keys, or the ledger's keys of a file ledger.
func (c Config) Check(o Options) (*Keys, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := o.CheckFiles(); err != nil {
		return nil, err
	}
	switch {
	case c.Model == "":
		return nil, option.Errorf("model", nil, "required (a model directory written by 'nvdp train' or 'nvdp run')")
	case c.Ledger == "":
		return nil, option.Errorf("ledger", nil, "required (a ledger file or a PostgreSQL URL, made once with 'nvdp serve ledger init')")
	case c.Keys != "" && c.KeysInLedger:
		return nil, option.Combination("%s and %s: give one (a keys file, or the PostgreSQL ledger's keys)", "keys", "keys_in_ledger")
	case c.KeysInLedger && !c.LedgerHoldsKeys:
		return nil, option.Combination("%s: the keys are a PostgreSQL ledger's, and %s "+option.Escape(c.Ledger)+" is a file",
			"keys_in_ledger", "ledger")
	case c.KeysInLedger && !option.IsAuto(o.BudgetEpsilon):
		return nil, option.MentionErrorf([]string{"keys_in_ledger"}, "budget_epsilon", o.BudgetEpsilon,
			"has no effect with keys_in_ledger (each key of the database has its own budget: nvdp serve keys budget)")
	}
	var keys *Keys
	if c.Keys != "" {
		var err error
		if keys, err = ReadKeys(c.Keys); err != nil {
			return nil, &option.Error{Option: "keys", Reason: err.Error()}
		}
	}
	if !c.KeysInLedger {
		if _, err := o.Budgets(keys); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// New makes the server of c on the opened releaser and ledger ([New]), with
// the key source of c ([Config.KeySource]: keys, those [Config.Check] read,
// or the ledger's own), after logging what the ledger holds to log (nil:
// slog's default). Errors are KeySource's and New's.
func (c Config) New(rel Releaser, lg ledger.Ledger, keys *Keys, o Options, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	if info, err := lg.Info(); err == nil {
		log.Info("ledger opened", "ledger", lg.Name(), "format", info.Format, "ledger_id", info.LedgerID, "accounts", info.Accounts,
			"releases", info.Releases, "restores", len(info.Restores))
	}
	ks, err := c.KeySource(keys, lg)
	if err != nil {
		return nil, err
	}
	return New(rel, lg, ks, o, log)
}

// KeySource returns where a server of c authenticates: the keys Check read,
// the ledger's own when KeysInLedger, or nil without either, for one shared
// account, [SharedAccount]. Error: KeysInLedger with a ledger that holds no
// keys.
func (c Config) KeySource(keys *Keys, lg ledger.Ledger) (KeySource, error) {
	switch {
	case keys != nil:
		return keys, nil
	case !c.KeysInLedger:
		return nil, nil
	}
	ks, ok := lg.(KeySource)
	if !ok {
		return nil, option.Errorf("keys_in_ledger", nil, "ledger %s holds no keys", lg.Name())
	}
	return ks, nil
}

// HandleSignals acts on the signals an operator sends a running server, as
// they arrive on sigs, until sigs is closed. Backup, SIGUSR1 on unix,
// writes a backup of the ledger with [Server.Backup], which logs it. Reload,
// SIGHUP, reads the keys file at keysFile again with
// [Server.ReloadKeysFile]. Other signals are ignored.
func (s *Server) HandleSignals(sigs <-chan os.Signal, backup, reload os.Signal, keysFile string) {
	for sig := range sigs {
		switch sig {
		case backup:
			s.Backup() // logged, counted in the metrics
		case reload:
			s.ReloadKeysFile(keysFile)
		}
	}
}

// ReloadKeysFile reads the keys file at path again and gives it to the
// server with [Server.ReloadKeys], as `nvdp serve` does on SIGHUP. A file
// that does not read or check is logged, and the keys in use stay. Without
// a keys file, path "", it logs that there is none and does nothing.
func (s *Server) ReloadKeysFile(path string) {
	if path == "" {
		s.log.Warn("SIGHUP: no keys file to read again")
		return
	}
	k, err := ReadKeys(path)
	if err == nil {
		err = s.ReloadKeys(k)
	}
	if err != nil {
		s.log.Error("SIGHUP: keys not reloaded; the keys in use stay", "keys", path, "error", err)
	}
}

// NewFileKey makes an API key with [GenerateKey] for the account id,
// appends its line to the keys file at keys with [AppendKey] and returns
// the key, which is stored nowhere: the caller gives it to its holder now.
// budget is the key's own budget in epsilon at the model's delta, +Inf for
// no limit, or [option.Auto] for none, leaving the server's BudgetEpsilon.
//
// Errors: a [*option.CombinationError] naming keys and id when either is
// missing. An [*option.Error] for budget_epsilon reports a negative or NaN
// budget, checked before any key is made, and one for keys an error of
// AppendKey.
func NewFileKey(keys, id string, budget float64) (string, error) {
	switch {
	case keys == "" || id == "":
		return "", option.Combination("%s and %s are required", "keys", "id")
	case !option.IsAuto(budget) && !(budget >= 0):
		return "", option.Errorf("budget_epsilon", budget, "must be >= 0")
	}
	key, err := GenerateKey()
	if err != nil {
		return "", err
	}
	if err := AppendKey(keys, id, key, budget); err != nil {
		return "", option.Wrap("keys", err)
	}
	return key, nil
}

package pgledger

import (
	"strings"

	"github.com/nvdp-project/nvdp/option"
)

// CheckKeysAt checks, before anything is opened, that loc names a ledger
// whose API keys can be managed: a PostgreSQL ledger, as [IsPostgres]
// decides. A file ledger's server reads a keys file instead. Errors: an
// [*option.Error] for ledger, none given or a file.
func CheckKeysAt(loc string) error {
	switch {
	case loc == "":
		return option.Errorf("ledger", nil, "required")
	case !IsPostgres(loc):
		return option.Errorf("ledger", option.Show(loc), "keys live in a PostgreSQL ledger; a file ledger's server reads a keys file (nvdp serve keygen)")
	}
	return nil
}

// ParseLabels parses a key's labels, each "KEY=VALUE", and checks them with
// [CheckLabels]. The value may hold "=" and be empty; a later label of a
// name replaces an earlier one. Errors: an [*option.Error] for label, with
// the label that is not KEY=VALUE as its value.
func ParseLabels(kvs []string) (map[string]string, error) {
	labels := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, option.Errorf("label", kv, "want KEY=VALUE")
		}
		labels[k] = v
	}
	if err := CheckLabels(labels); err != nil {
		return nil, &option.Error{Option: "label", Reason: err.Error()}
	}
	return labels, nil
}

// CheckKeyBudget checks the budget of a key of the database, in epsilon at
// the model's delta, before it is stored. It is required, since a key of
// the database has no default budget, so [option.Auto] is refused; it is a
// number >= 0, +Inf for no limit. Errors: an [*option.Error] for
// budget_epsilon.
func CheckKeyBudget(budget float64) error {
	switch {
	case option.IsAuto(budget):
		return option.Errorf("budget_epsilon", nil, "required: a key of the database has its own budget (a number >= 0, inf: no limit)")
	case !(budget >= 0):
		return option.Errorf("budget_epsilon", budget, "must be >= 0")
	}
	return nil
}

package ledger

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var updateBudgetGolden = flag.Bool("update-budget-golden", false, "rewrite testdata/budget_golden.json from this build")

// budgetCase is an account charged releases under curves (by name, each an
// RDP curve of rd(order) = order rho, or a Gaussian curve of mu), and the
// model's curve whose balance is asked, against budget.
type budgetCase struct {
	name    string
	charged map[string]uint64
	model   string
	budget  float64
}

// budgetCurves are the curves of the cases: "r" RDP curves (rho), "g"
// Gaussian curves (mu).
func budgetCurves() map[string]*Curve {
	out := map[string]*Curve{}
	for name, rho := range map[string]float64{"r1": 1e-4, "r2": 0.02, "r3": 0.5} {
		c, _, _, _, err := NewCurve(gaussianGuarantee(rho))
		if err != nil {
			panic(err)
		}
		out[name] = c
	}
	for name, mu := range map[string]float64{"g1": 0.02, "g2": 1.666, "g3": 0.3} {
		c, _, _, _, err := NewCurve(exactGuarantee(mu))
		if err != nil {
			panic(err)
		}
		out[name] = c
	}
	return out
}

// budgetCases are the cases of TestBudgetAnswersUnchanged: empty accounts,
// one curve, several of one accountant, mixed accountants, budgets of 0,
// exactly spent, +Inf.
func budgetCases() []budgetCase {
	return []budgetCase{
		{"empty, rdp model", nil, "r2", 8},
		{"empty, gaussian model", nil, "g2", 8},
		{"empty, budget 0", nil, "g2", 0},
		{"empty, budget inf", nil, "r1", math.Inf(1)},
		{"one rdp curve", map[string]uint64{"r2": 10}, "r2", 8},
		{"one rdp curve, other model", map[string]uint64{"r2": 10}, "r1", 8},
		{"one gaussian curve", map[string]uint64{"g2": 10}, "g2", 64},
		{"one gaussian curve, small mu", map[string]uint64{"g1": 1000}, "g1", 4},
		{"two gaussian curves", map[string]uint64{"g1": 500, "g3": 7}, "g2", 16},
		{"gaussian then rdp model", map[string]uint64{"g1": 100}, "r2", 8},
		{"mixed", map[string]uint64{"g2": 3, "r2": 4}, "g2", 32},
		{"mixed, three curves", map[string]uint64{"g1": 9, "g3": 2, "r1": 1000}, "r3", 50},
		{"over budget", map[string]uint64{"r3": 100}, "r3", 1},
		{"over budget, gaussian", map[string]uint64{"g2": 100}, "g2", 1},
		{"huge counts", map[string]uint64{"r1": 1 << 40}, "r1", math.Inf(1)},
		{"rdp, budget inf", map[string]uint64{"r2": 3}, "r2", math.Inf(1)},
		{"a zero count", map[string]uint64{"g2": 0, "r2": 2}, "g2", 8},
	}
}

// budgetAnswer is what the service answers for a case: the balance and the
// account, their floats as bits.
type budgetAnswer struct {
	Spent, Remaining, RemainingReleases, AccountSpent, AccountOrder string
	Releases                                                        uint64
	Accountant, AccountAccountant                                   string
}

func bits(f float64) string { return fmt.Sprintf("%016x", math.Float64bits(f)) }

// TestBudgetAnswersUnchanged: the balance and the account of every case
// are the float64s, bit for bit, of the build before Grid moved to
// privacy (testdata/budget_golden.json, written by that build).
func TestBudgetAnswersUnchanged(t *testing.T) {
	curves := budgetCurves()
	byID := map[string]*Curve{}
	for _, c := range curves {
		byID[c.ID] = c
	}
	lookup := func(id string) (*Curve, error) { return byID[id], nil }
	var orders []float64
	for _, p := range gaussianGuarantee(0.1).Curve {
		orders = append(orders, p.Order)
	}
	comp := Grid{Orders: orders, Delta: curves["r1"].Delta}
	got := map[string]budgetAnswer{}
	for _, tc := range budgetCases() {
		counts := map[string]uint64{}
		for name, n := range tc.charged {
			counts[curves[name].ID] = n
		}
		bal, err := comp.Balance("a", counts, lookup, curves[tc.model], tc.budget)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		acct, err := comp.Account("a", counts, 1, time.Time{}, lookup)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got[tc.name] = budgetAnswer{Spent: bits(float64(bal.SpentEpsilon)), Remaining: bits(float64(bal.RemainingEpsilon)),
			RemainingReleases: bits(float64(bal.RemainingReleases)), AccountSpent: bits(float64(acct.SpentEpsilon)),
			AccountOrder: bits(float64(acct.SpentOrder)), Releases: bal.Releases, Accountant: bal.Accountant, AccountAccountant: acct.Accountant}
	}
	path := filepath.Join("testdata", "budget_golden.json")
	if *updateBudgetGolden {
		b, _ := json.MarshalIndent(got, "", "  ")
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]budgetAnswer
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != len(budgetCases()) {
		t.Fatalf("%d golden cases, %d cases", len(want), len(budgetCases()))
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: got %+v, want %+v", name, got[name], w)
		}
	}
}

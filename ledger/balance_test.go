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

	"github.com/nvdp-project/nvdp/privacy"
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

// balanceBits is a balance with its floats as bits, to compare bit for bit.
func balanceBits(b Balance) string {
	return fmt.Sprintf("%s %d %s %s %s %s %s %s", b.Account, b.Releases, bits(float64(b.SpentEpsilon)), b.Accountant,
		bits(float64(b.BudgetEpsilon)), bits(float64(b.RemainingEpsilon)), bits(float64(b.RemainingReleases)), bits(b.Delta))
}

// memoGrids are the grid of budgetCurves without a memo and with one.
func memoGrids() (plain, memo Grid, lookup func(string) (*Curve, error), curves map[string]*Curve) {
	curves = budgetCurves()
	byID := map[string]*Curve{}
	for _, c := range curves {
		byID[c.ID] = c
	}
	var orders []float64
	for _, p := range gaussianGuarantee(0.1).Curve {
		orders = append(orders, p.Order)
	}
	plain = Grid{Orders: orders, Delta: curves["r1"].Delta}
	memo = plain
	memo.Memo = &Memo{}
	return plain, memo, func(id string) (*Curve, error) { return byID[id], nil }, curves
}

// TestMemoSameBalances: a grid with a memo answers every balance and
// charge with the same bits as one without, the second time from the memo:
// the cases of TestBudgetAnswersUnchanged twice over, each also against
// other budgets (the same counts and curve), and a run of charges of two
// accounts under two curves, whose balances before a charge are those
// after the last one.
func TestMemoSameBalances(t *testing.T) {
	plain, memo, lookup, curves := memoGrids()
	for pass := range 2 {
		for _, tc := range budgetCases() {
			counts := map[string]uint64{}
			for name, n := range tc.charged {
				counts[curves[name].ID] = n
			}
			for _, budget := range []float64{tc.budget, 8, 64, math.Inf(1)} {
				want, err := plain.Balance("a"+tc.name, counts, lookup, curves[tc.model], budget)
				if err != nil {
					t.Fatal(err)
				}
				got, err := memo.Balance("a"+tc.name, counts, lookup, curves[tc.model], budget)
				if err != nil {
					t.Fatal(err)
				}
				if balanceBits(got) != balanceBits(want) {
					t.Errorf("pass %d, %s, budget %v: memo %+v, accountant %+v", pass, tc.name, budget, got, want)
				}
			}
		}
	}
	held := len(memo.Memo.bal)
	accounts := [2]map[string]uint64{{}, {}}
	plainAccounts := [2]map[string]uint64{{}, {}}
	for i := range 40 {
		a, curve, releases := i%2, curves[[]string{"g2", "r2", "g1"}[i%3]], 1+i%4
		want, werr := plain.Charge("acct", plainAccounts[a], lookup, curve, releases, 200)
		got, gerr := memo.Charge("acct", accounts[a], lookup, curve, releases, 200)
		if balanceBits(got) != balanceBits(want) || (gerr == nil) != (werr == nil) {
			t.Fatalf("charge %d: memo %+v (%v), accountant %+v (%v)", i, got, gerr, want, werr)
		}
	}
	// Each charge composes its balance after; its balance before was the
	// account's balance after its last charge of the same curve, or new.
	if n := len(memo.Memo.bal) - held; n >= 80 || n < 40 {
		t.Errorf("40 charges added %d balances to the memo, want 40 to 79", n)
	}
}

// TestMemoEvicts: a memo holds memoSize balances, the newest.
func TestMemoEvicts(t *testing.T) {
	_, memo, lookup, curves := memoGrids()
	for i := range memoSize + 10 {
		if _, err := memo.Balance("a", map[string]uint64{curves["r1"].ID: uint64(i)}, lookup, curves["r1"], math.Inf(1)); err != nil {
			t.Fatal(err)
		}
	}
	if len(memo.Memo.bal) != memoSize {
		t.Fatalf("memo holds %d balances, want %d", len(memo.Memo.bal), memoSize)
	}
	newest := memo.memoKey(charges{ids: []string{curves["r1"].ID}, counts: []privacy.Count{{Releases: memoSize + 9}}}, curves["r1"], math.Inf(1))
	oldest := memo.memoKey(charges{ids: []string{curves["r1"].ID}, counts: []privacy.Count{{Releases: 1}}}, curves["r1"], math.Inf(1))
	if _, ok := memo.Memo.bal[newest]; !ok {
		t.Error("the newest balance was evicted")
	}
	if _, ok := memo.Memo.bal[oldest]; ok {
		t.Error("the oldest balance was kept")
	}
}

// BenchmarkChargeMemo charges one release at a time to one account, with an
// infinite budget and one a million releases away, with and without a memo.
func BenchmarkChargeMemo(b *testing.B) {
	plain, memo, lookup, curves := memoGrids()
	for _, g := range []struct {
		name string
		grid Grid
	}{{"accountant", plain}, {"memo", memo}} {
		for _, budget := range []float64{math.Inf(1), 1.5e6} {
			b.Run(fmt.Sprintf("%s/budget=%v", g.name, budget), func(b *testing.B) {
				counts := map[string]uint64{}
				for b.Loop() {
					if _, err := g.grid.Balance("a", counts, lookup, curves["g2"], budget); err != nil {
						b.Fatal(err)
					}
					if _, err := g.grid.Charge("a", counts, lookup, curves["g2"], 1, budget); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

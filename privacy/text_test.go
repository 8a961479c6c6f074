package privacy

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/jsonfloat"
)

// TestFormatValue: six decimals, +Inf, n/a for NaN; nil is "not computed".
func TestFormatValue(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{{0, "0.000000"}, {1.25, "1.250000"}, {-2.5e-7, "-0.000000"}, {46450.35572603645, "46450.355726"},
		{math.Inf(1), "+Inf"}, {math.Inf(-1), "-Inf"}, {math.NaN(), "n/a"}} {
		if got := FormatValue(jsonfloat.Float(c.v)); got != c.want {
			t.Errorf("FormatValue(%v) = %q, want %q", c.v, got, c.want)
		}
		v := jsonfloat.Float(c.v)
		if got := FormatOptional(&v); got != c.want {
			t.Errorf("FormatOptional(%v) = %q, want %q", c.v, got, c.want)
		}
	}
	if got := FormatOptional(nil); got != "not computed" {
		t.Errorf("FormatOptional(nil) = %q", got)
	}
}

// rows collects the rows WriteRows writes, "key=value" each.
func rows(r *CertifiedReport) []string {
	var out []string
	r.WriteRows(func(k, v string) { out = append(out, k+"="+v) })
	return out
}

// TestCertifiedReportWriteRows: nil writes nothing; a finite report writes
// its RD with the parts, epsilon, BDP, scope and release; an unclipped one
// (C_mu +Inf) writes "none: unclipped" with the reason and scope only.
func TestCertifiedReportWriteRows(t *testing.T) {
	if got := rows(nil); len(got) != 0 {
		t.Errorf("nil report wrote %q", got)
	}
	finite, err := NewCertifiedReport(mainJobSet(), ReportOptions{Order: 1.1, Releases: 2, Delta: DefaultDelta, Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	unclipped := mainJobSet()
	unclipped.CMu = math.Inf(1)
	inf, err := NewCertifiedReport(unclipped, ReportOptions{Order: 1.1, Releases: 1, Delta: DefaultDelta, Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		r    *CertifiedReport
		want []string // row prefixes, in order
	}{
		{"finite, 2 releases", finite, []string{
			"certified RD (every pair of inputs), order 1.1, 2 releases=92900.711452  (variance 70025.974245 + mean 22530.124501 + Dirichlet 344.612706)",
			"certified ε (delta 1e-05)=", "certified BDP ε_μ (delta 1e-05)=", "  certified scope=" + finite.Scope, "  release="}},
		{"unclipped", inf, []string{"certified guarantee (every pair of inputs)=none: unclipped (" + inf.Reason + ")", "  certified scope=" + inf.Scope}},
	} {
		got := rows(c.r)
		if len(got) != len(c.want) {
			t.Errorf("%s: %d rows %q, want %d", c.name, len(got), got, len(c.want))
			continue
		}
		for i, w := range c.want {
			if !strings.HasPrefix(got[i], w) {
				t.Errorf("%s: row %d %q, want prefix %q", c.name, i, got[i], w)
			}
		}
	}
}

// TestClipSetReportWriteText pins `nvdp certify`'s text of the main job's
// constants, and its JSON keys beside the embedded report's.
func TestClipSetReportWriteText(t *testing.T) {
	r, err := NewClipSetReport(mainJobSet(), ClipSetOptions{ReportOptions: ReportOptions{Order: 1.1, Releases: 1, Delta: DefaultDelta, Source: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	r.Witness = "w.safetensors"
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := `certified                      ` + r.Scope + `
constants                      N 129, P 128, C_mu 2, C_amin 0.3, C_amax 1, prior alpha 1
logvar range                   [-1.7047953, 0] (margin 0.6931 at clip order 1.1)
rd_certified (order 1.1)       46450.355726 nats
  variance / mean / dirichlet  35012.987123 / 11265.062250 / 172.306353
finite below order             1.2222094
epsilon (delta 1e-05)          31000.553116, RDP at order 1.01
BDP eps_mu (delta 1e-05)       31006.163270 (moment order 0.01)
release                        ` + r.Release.String() + `
witness                        w.safetensors
`
	if b.String() != want {
		t.Errorf("text\n%s\nwant\n%s", b.String(), want)
	}
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"rd_certified", "scope", "rd_per_release", "dirichlet_witness", "c_mu", "prior_mu", "prior_var",
		"clip_order", "logvar_margin", "logvar_floor", "logvar_cap", "c_alpha_min", "c_alpha_max", "prior_alpha", "witness"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, js)
		}
	}
	if _, ok := m["model"]; ok {
		t.Errorf("JSON has a model without one: %s", js)
	}
}

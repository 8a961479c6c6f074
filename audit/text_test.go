package audit

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/nvdp-project/nvdp/internal/texttest"
	"github.com/nvdp-project/nvdp/privacy"
)

// TestReportWriteText: the text of a principled and a reference audit holds
// its mode's rows in order, the histogram and BDP tables where the report
// has them, and the note that no certified guarantee was given; a
// certificate replaces that note by its rows.
func TestReportWriteText(t *testing.T) {
	p := synthPosteriors(6, 4, 3, 1)
	principled := mustAudit(t, p, DefaultOptions())
	ref := DefaultOptions()
	ref.Mode, ref.BatchSize = privacy.ModeReference, 2
	reference := mustAudit(t, p, ref)
	set := privacy.ClipSet{Components: 4, Dims: 3, CMu: 2, PriorMu: []float64{0}, PriorVar: []float64{1},
		ClipOrder: 1.1, LogvarMargin: 0.6931, AlphaMin: 0.3, AlphaMax: 1, PriorAlpha: 1}
	cert, err := privacy.NewCertifiedReport(set, privacy.ReportOptions{Order: 1.1, Releases: 1, Delta: privacy.DefaultDelta, Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	noCert := "note: no certified guarantee"
	for _, c := range []struct {
		name   string
		r      *Report
		cert   *privacy.CertifiedReport
		want   []string // in this order
		absent []string
	}{
		{"principled", principled, nil, []string{"file  ", "f.safetensors\n", "mode  ", "principled\n", "examples x components x dims  ", "6 x 4 x 3\n",
			"ordered pairs  ", "30\n", "RD max over 6(6-1) = 30 pairs (empirical, not a guarantee)", "BDP ε_μ estimate, worst individual",
			"seconds  ", "0.00\n", "\nhistogram of finite RD bounds", "\nBDP per moment order l", noCert}, []string{"certified RD", "batch size / q"}},
		{"principled, certified", principled, cert, []string{"RD max over", "certified RD (every pair of inputs), order 1.1", "  certified scope", "seconds  "},
			[]string{noCert}},
		{"reference", reference, nil, []string{"mode  ", "reference\n", "batch size / q  ", "2 / ", "RD max (z-filtered; empirical batch estimate, not a guarantee)",
			"accountant cost C", "seconds  ", noCert}, []string{"ordered pairs", "histogram"}},
	} {
		var b bytes.Buffer
		c.r.WriteText(&b, "f.safetensors", empiricalTexts(c.r, ""), c.cert)
		s := b.String()
		texttest.InOrder(t, c.name, s, c.want)
		texttest.Absent(t, c.name, s, c.absent)
	}
}

// TestOutputJSON: the report's fields at the top level beside "empirical",
// and "certified" only with a certificate.
func TestOutputJSON(t *testing.T) {
	r := mustAudit(t, synthPosteriors(4, 3, 2, 1), DefaultOptions())
	for _, c := range []struct {
		name string
		cert *privacy.CertifiedReport
		want bool
	}{{"no certificate", nil, false}, {"certificate", &privacy.CertifiedReport{}, true}} {
		b, err := json.Marshal(Output{Report: r, Empirical: empiricalTexts(r, "dev"), Certified: c.cert})
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		_, cert := m["certified"]
		if m["rd_max"] == nil || m["empirical"] == nil || m["mode"] == nil || cert != c.want {
			t.Errorf("%s: keys of %s", c.name, b)
		}
	}
}

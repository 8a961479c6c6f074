package audit

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/privacy/privacytest"
)

// FuzzAuditPosteriors: a file privacy's reader accepts (privacy's
// FuzzParsePosteriors fuzzes the reader) audits in both modes, never a
// panic, and the reports marshal to JSON and read back. Seeds: the files of
// privacytest.FileCases (null in prior arrays, mu 1e20, NaN, logvar beyond
// exp's range, negative alpha, truncated, shape mismatches, ...).
//
//	go test ./audit -run '^$' -fuzz FuzzAuditPosteriors -fuzztime 60s
func FuzzAuditPosteriors(f *testing.F) {
	for _, c := range privacytest.FileCases(f) {
		f.Add(c.Data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := privacy.ParsePosteriors("fuzz", data)
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("accepted posteriors do not validate: %v", err)
		}
		if p.M < 2 || p.M*p.M*p.N*p.P > 1<<16 {
			return // nothing to audit, or too slow for a fuzz iteration
		}
		for _, mode := range []privacy.Mode{privacy.ModePrincipled, privacy.ModeReference} {
			o := DefaultOptions()
			o.Mode, o.Workers, o.BatchSize = mode, 1, 2
			r, err := Audit(context.Background(), p, o)
			if err != nil {
				t.Fatalf("%s audit of accepted posteriors: %v", mode, err)
			}
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatalf("%s report does not marshal: %v", mode, err)
			}
			var back Report
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("%s report does not read back: %v", mode, err)
			}
			if x, y := float64(back.RDMax), float64(r.RDMax); x != y && !(math.IsNaN(x) && math.IsNaN(y)) {
				t.Fatalf("%s rd_max %v read back as %v", mode, y, x)
			}
			if h := r.Histogram; h != nil {
				for _, e := range h.Edges {
					if math.IsNaN(e) || math.IsInf(e, 0) {
						t.Fatalf("histogram edges %v", h.Edges)
					}
				}
			}
		}
	})
}

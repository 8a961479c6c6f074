package privacy_test

import (
	"testing"

	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/privacy/privacytest"
)

// FuzzParsePosteriors: any input is a posterior file or an error, never a
// panic; a file the reader accepts validates. Seeds: the files of
// privacytest.FileCases (null in prior arrays, mu 1e20, NaN, logvar beyond
// exp's range, negative alpha, truncated, shape mismatches, ...). That every
// accepted file audits is audit's FuzzAuditPosteriors, on the same seeds.
//
//	go test ./privacy -run '^$' -fuzz FuzzParsePosteriors -fuzztime 60s
func FuzzParsePosteriors(f *testing.F) {
	for _, c := range privacytest.FileCases(f) {
		f.Add(c.Data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := privacy.ParsePosteriors("fuzz", data)
		if err != nil {
			if p != nil {
				t.Fatalf("error %v with posteriors", err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("accepted posteriors do not validate: %v", err)
		}
	})
}

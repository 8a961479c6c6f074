package attack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/release"
)

// The learned attacks' readers take what `--json` writes and reject, naming
// the file, a report that cannot be placed along a frontier (no model, no
// certified guarantee, no property) or whose references are missing (no
// chance result, a decoder on the release without its encoder-output
// twin), and anything that is not their JSON.
func TestReadLearnedReports(t *testing.T) {
	setup := Setup{Model: release.ModelInfo{Dir: "runs/m", Task: "sst2", Variant: "gaussian"}, Certified: &privacy.Guarantee{Epsilon: 4, Delta: 1e-5}}
	inv := func(edit func(*InvertReport)) any {
		r := &InvertReport{Setup: setup, Results: []InvertResult{
			{Features: FeaturesNone, Decoder: DecoderMajority},
			{Features: FeaturesRelease, Decoder: DecoderNearest, TokenScores: TokenScores{F1: 0.25}},
			{Features: FeaturesEncoder, Decoder: DecoderNearest},
		}}
		edit(r)
		return r
	}
	attr := func(edit func(*AttributeReport)) any {
		r := &AttributeReport{Setup: setup, Property: Property{Name: PropertyName}, Results: []AttributeResult{
			{Features: FeaturesNone, Classifier: ClassifierMajority},
			{Features: FeaturesRelease, Classifier: ModelLinear, AUC: 0.75},
			{Features: FeaturesEncoder, Classifier: ModelLinear},
		}}
		edit(r)
		return r
	}
	read := map[string]func(string) (any, error){
		"invert":    func(p string) (any, error) { return ReadInvertReport(p) },
		"attribute": func(p string) (any, error) { return ReadAttributeReport(p) },
	}
	for _, tc := range []struct {
		name, reader string
		report       any // nil: the file holds text
		text         string
		err          string // "": read
	}{
		{"invert", "invert", inv(func(*InvertReport) {}), "", ""},
		{"attribute", "attribute", attr(func(*AttributeReport) {}), "", ""},
		{"no model", "invert", inv(func(r *InvertReport) { r.Model.Dir = "" }), "", "no model"},
		{"no variant", "attribute", attr(func(r *AttributeReport) { r.Model.Variant = "" }), "", "no model"},
		{"no guarantee", "invert", inv(func(r *InvertReport) { r.Certified = nil }), "", "no certified guarantee"},
		{"no result", "invert", inv(func(r *InvertReport) { r.Results = nil }), "", "no result"},
		{"no chance", "invert", inv(func(r *InvertReport) { r.Results = r.Results[1:] }), "", "no none result"},
		{"release without encoder", "invert", inv(func(r *InvertReport) { r.Results = r.Results[:2] }),
			"", "attacker nn reads the release but not the encoder"},
		{"encoder without release", "attribute", attr(func(r *AttributeReport) { r.Results = append(r.Results[:1], r.Results[2]) }),
			"", "attacker linear reads the encoder but not the release"},
		{"unknown features", "attribute", attr(func(r *AttributeReport) { r.Results[1].Features = "tokens" }), "", `unknown features "tokens"`},
		{"no property", "attribute", attr(func(r *AttributeReport) { r.Property.Name = "" }), "", "no property"},
		{"not JSON", "invert", nil, "{", "unexpected end of JSON input"},
		{"truncated", "attribute", nil, `{"model": {"dir": "x"`, "unexpected end of JSON input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "r.json")
			var err error
			if tc.report != nil {
				err = atomicfile.WriteJSON(path, tc.report)
			} else {
				err = os.WriteFile(path, []byte(tc.text), 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := read[tc.reader](path)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				switch r := got.(type) {
				case *InvertReport:
					if r.Results[1].F1 != 0.25 || float64(r.Certified.Epsilon) != 4 {
						t.Errorf("read %+v", r)
					}
				case *AttributeReport:
					if r.Results[1].AUC != 0.75 || r.Property.Name != PropertyName {
						t.Errorf("read %+v", r)
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), path) ||
				!strings.HasPrefix(err.Error(), tc.reader+" report ") {
				t.Errorf("error %v, want %q naming %s", err, tc.err, path)
			}
		})
	}
	if _, err := ReadInvertReport(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("a missing file: %v", err)
	}
}

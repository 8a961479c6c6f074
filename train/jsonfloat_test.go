package train

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/nvdp-project/nvdp/privacy"
)

// TestReportJSONNonFinite: the run report's numbers that may be non-finite
// are jsonfloat numbers. A collapsed STS-B run (constant predictions: a NaN
// correlation) writes its report (before: json.Marshal failed on the
// collapse check's NaN value, losing report.json after training), and it
// reads back; metrics written as null before read as NaN.
func TestReportJSONNonFinite(t *testing.T) {
	cc := CheckCollapse("spearman", math.NaN(), 0, 0.001)
	rep := Report{Task: "stsb", Variant: "nvdp", Utility: Metrics{"pearson": math.NaN(), "spearman": math.NaN()}, Collapse: &cc,
		Privacy: &PrivacySummary{Mode: privacy.ModePrincipled, RDMax: 0.001}}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatalf("report with a NaN metric: %v", err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(float64(back.Collapse.Value)) || !math.IsNaN(back.Utility["spearman"]) || back.Privacy.RDMax != 0.001 ||
		back.Privacy.RDMean != nil || back.Privacy.BDPEpsilon != nil {
		t.Errorf("read back: collapse %+v utility %v privacy %+v", back.Collapse, back.Utility, back.Privacy)
	}
	var m Metrics
	if err := json.Unmarshal([]byte(`{"accuracy":0.5,"mcc":null,"f1":"NaN"}`), &m); err != nil || m["accuracy"] != 0.5 || !math.IsNaN(m["mcc"]) || !math.IsNaN(m["f1"]) {
		t.Errorf("metrics %v (%v)", m, err)
	}
}

// TestPrivacySummaryOldFiles: a summary written before jsonfloat (null for
// +Inf and for not computed) reads as audit.Numbers says.
func TestPrivacySummaryOldFiles(t *testing.T) {
	var s PrivacySummary
	if err := json.Unmarshal([]byte(`{"mode":"principled","rd_max":null,"rd_mean":null,"bdp_epsilon":null,"invalid_pairs":4,"pairs":12}`), &s); err != nil {
		t.Fatal(err)
	}
	if !math.IsInf(float64(s.RDMax), 1) || s.RDMean != nil || s.BDPEpsilon == nil || !math.IsInf(float64(*s.BDPEpsilon), 1) || s.Pairs != 12 {
		t.Errorf("old summary with invalid pairs: %+v", s)
	}
	if err := json.Unmarshal([]byte(`{"mode":"reference","rd_max":0.5,"rd_mean":0.25,"bdp_epsilon":null,"invalid_pairs":0,"pairs":12}`), &s); err != nil {
		t.Fatal(err)
	}
	if s.RDMax != 0.5 || s.RDMean == nil || *s.RDMean != 0.25 || s.BDPEpsilon != nil {
		t.Errorf("old summary, BDP not computed: %+v", s)
	}
}

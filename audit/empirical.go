package audit

import (
	"fmt"
	"strconv"

	"github.com/nvdp-project/nvdp/privacy"
)

// EmpiricalLabel says what the audited numbers of an audit are: Label
// "empirical", Scope which pairs the maximum runs over, BDP how the BDP
// epsilon is estimated.
type EmpiricalLabel struct {
	Label string `json:"label"`
	Scope string `json:"scope"`
	BDP   string `json:"bdp_epsilon"`
}

// empiricalTexts returns the label of an audit report r of the texts of split,
// where split is "" when unknown. Principled audits are the max over ordered
// pairs, or a sample of them, with a Student-t estimate of BDP; reference
// audits are the released code's batch-wise estimates.
func empiricalTexts(r *Report, split string) EmpiricalLabel {
	return EmpiricalOf(r, split, "texts")
}

// EmpiricalOf is empiricalTexts for a report whose examples are called
// examples, such as "texts" or "utterances".
func EmpiricalOf(r *Report, split, examples string) EmpiricalLabel {
	texts := examples
	if split != "" {
		texts = split + " " + examples
	}
	l := EmpiricalLabel{Label: privacy.LabelEmpirical}
	if r.Mode == privacy.ModeReference {
		l.Scope = fmt.Sprintf("max over batches of the z-filtered within-batch pairs of %d %s (the released code's estimate); not a guarantee", r.Examples, texts)
		l.BDP = privacy.LabelEstimate + " (the released code's accountant: Student-t over within-batch pairs, pairs treated as independent)"
		return l
	}
	pairs := fmt.Sprintf("max over %d ordered pairs of %d %s", r.Pairs, r.Examples, texts)
	if r.Sampled {
		pairs = fmt.Sprintf("max over a uniform sample of %d ordered pairs of %d %s", r.Pairs, r.Examples, texts)
	}
	if r.Mask {
		pairs += " (padding dropped: length treated as public)"
	}
	l.Scope = pairs + "; not a guarantee"
	l.BDP = privacy.LabelEstimate + " (Student-t, confidence " + formatConfidence(r.Confidence) + "; pairs treated as independent)"
	return l
}

// formatConfidence writes a confidence close to 1 as "1-<tail>"; the
// default 1 - 1e-16 (float64 0.9999999999999999) as "1-1e-16".
func formatConfidence(c float64) string {
	if c == defaultConfidence {
		return "1-1e-16"
	}
	if c > 0.999 && c < 1 {
		return "1-" + strconv.FormatFloat(1-c, 'g', 3, 64)
	}
	return strconv.FormatFloat(c, 'g', -1, 64)
}

package audit

import (
	"bytes"
	"encoding/json"
	"math"

	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/privacy"
)

// Reading audit reports written before jsonfloat. Up to commit 7b92b44 the
// audit wrote every non-finite number as JSON null (privacy.JSONFloat): an
// undefined bound (+Inf) and a number that was not computed (NaN) looked the
// same. Now +Inf and NaN are "Infinity" and "NaN" and a number not computed
// is absent, so a null can only come from such a file. It is read as what
// the old writer held: +Inf for rd_max and the BDP epsilons when the audit
// counted undefined pairs, else not computed (rd_max: NaN); rd_mean null is
// not computed (no finite pair); a BDP order's null cost or epsilon +Inf.

// Numbers are the headline numbers of an audit as its JSON holds them, in a
// [Report] and in train's privacy summary, which copies them, decoded with the
// rules above. Decode a report's JSON object into it.
type Numbers struct {
	RDMax      jsonfloat.Float  // +Inf when no pair is finite
	RDMean     *jsonfloat.Float // nil: not computed
	BDPEpsilon *jsonfloat.Float // nil: not computed
	// BDPEpsilonPooled and BDPOrder (Report only; nil: not computed).
	BDPEpsilonPooled, BDPOrder *jsonfloat.Float
}

// UnmarshalJSON reads the numbers of an audit report's JSON object b.
func (n *Numbers) UnmarshalJSON(b []byte) error {
	var raw struct {
		RDMax            json.RawMessage `json:"rd_max"`
		RDMean           json.RawMessage `json:"rd_mean"`
		BDPEpsilon       json.RawMessage `json:"bdp_epsilon"`
		BDPEpsilonPooled json.RawMessage `json:"bdp_epsilon_pooled"`
		BDPOrder         json.RawMessage `json:"bdp_order"`
		InvalidPairs     int64           `json:"invalid_pairs"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	var undefined *jsonfloat.Float // what a null BDP epsilon meant
	if raw.InvalidPairs > 0 {
		undefined = jsonfloat.New(math.Inf(1))
	}
	rdMax, err := legacyOptional(raw.RDMax, undefined)
	if err != nil {
		return err
	}
	*n = Numbers{RDMax: jsonfloat.Float(math.NaN())}
	if rdMax != nil {
		n.RDMax = *rdMax
	}
	if n.RDMean, err = legacyOptional(raw.RDMean, nil); err != nil {
		return err
	}
	if n.BDPEpsilon, err = legacyOptional(raw.BDPEpsilon, undefined); err != nil {
		return err
	}
	if n.BDPEpsilonPooled, err = legacyOptional(raw.BDPEpsilonPooled, undefined); err != nil {
		return err
	}
	var nan *jsonfloat.Float // the order of an undefined BDP epsilon
	if undefined != nil {
		nan = jsonfloat.New(math.NaN())
	}
	n.BDPOrder, err = legacyOptional(raw.BDPOrder, nan)
	return err
}

// legacyOptional decodes an optional number: absent is nil (not computed),
// a number or a jsonfloat string its value, null (only in files written
// before jsonfloat) ifNull.
func legacyOptional(raw json.RawMessage, ifNull *jsonfloat.Float) (*jsonfloat.Float, error) {
	switch {
	case len(raw) == 0:
		return nil, nil
	case bytes.Equal(bytes.TrimSpace(raw), []byte("null")):
		if ifNull == nil {
			return nil, nil
		}
		v := *ifNull // a copy: callers share ifNull
		return &v, nil
	}
	var f jsonfloat.Float
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, err
	}
	return &f, nil
}

// UnmarshalJSON reads a report written by encoding/json, older ones included,
// as [Numbers] describes.
func (r *Report) UnmarshalJSON(b []byte) error {
	type plain Report // without this method
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	var n Numbers
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	p.RDMax, p.RDMean, p.BDPEpsilon, p.BDPEpsilonPooled, p.BDPOrder = n.RDMax, n.RDMean, n.BDPEpsilon, n.BDPEpsilonPooled, n.BDPOrder
	*r = Report(p)
	return nil
}

// UnmarshalJSON reads one BDP order. In files written before jsonfloat a null
// cost or epsilon is +Inf: an infinite pair or too few partners, which that
// writer did not tell apart.
func (o *BDPOrder) UnmarshalJSON(b []byte) error {
	type plain BDPOrder // without this method
	var raw struct {
		plain
		Cost       json.RawMessage `json:"cost"`
		Epsilon    json.RawMessage `json:"epsilon"`
		CostPooled json.RawMessage `json:"cost_pooled"`
		EpsPooled  json.RawMessage `json:"epsilon_pooled"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*o = BDPOrder(raw.plain)
	inf := jsonfloat.New(math.Inf(1))
	var err error
	for _, f := range []struct {
		raw json.RawMessage
		to  **jsonfloat.Float
	}{{raw.Cost, &o.Cost}, {raw.Epsilon, &o.Epsilon}, {raw.CostPooled, &o.CostPooled}, {raw.EpsPooled, &o.EpsPooled}} {
		if *f.to, err = legacyOptional(f.raw, inf); err != nil {
			return err
		}
	}
	return nil
}

// Output is an audit as `nvdp audit --json` writes it: the report's fields
// at the top level, the label of its numbers and, when the audited file's
// metadata carries the clip constants, the certified guarantee.
type Output struct {
	*Report
	Empirical EmpiricalLabel           `json:"empirical"`
	Certified *privacy.CertifiedReport `json:"certified,omitempty"`
}

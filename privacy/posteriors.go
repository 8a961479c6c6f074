// Package privacy certifies NVIB releases.
//
// [Certify] is the guarantee: the supremum of the paper's Eq. rdp over every
// pair of posteriors a clipping allows, from the clip constants alone. Around
// it are its RDP curve over orders, its (epsilon, delta) conversion, the
// certified BDP, and [Calibrate], which fits clip constants to a target.
// [PairBound] is Eq. rdp for one pair of posteriors. The package also holds
// the accountants' mathematics, for RDP and the exact Gaussian mechanism;
// the one [Mode] type; and the posterior file format, read by
// [ReadPosteriors] and [MapPosteriors] and written by [WritePosteriors]. The
// empirical side, Eq. rdp over the pairs of a file of posteriors, is package
// audit.
//
// All arithmetic is float64; posteriors are stored as float32, the training
// engine's precision. See docs/privacy.md for the derivations and every
// difference between the principled and reference modes.
package privacy

import (
	"encoding/json"
	"fmt"
	excerptpkg "github.com/nvdp-project/nvdp/internal/excerpt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/nvdp-project/nvdp/safetensors"
)

// Posteriors holds the NVIB posterior parameters of M examples, each of N
// components in P dimensions, component 0 being the prior component. This
// is the contract between training, where package nvib writes it, and
// auditing:
//
//	tensor  mu      float32 [M, N, P]  posterior means
//	tensor  logvar  float32 [M, N, P]  log variances, sigma = exp(logvar/2), |logvar| <= MaxAbsLogvar
//	tensor  alpha   float32 [M, N]     Dirichlet pseudo-counts, >= 0
//	tensor  attention_mask  uint8 [M, N]  optional, 1 = real component, 0 = padding
//	metadata prior_mu, prior_var       required; a number or a JSON array of P numbers, no null
//	metadata task, split, model, mode, clip_mu, clip_alpha_max, clip_order, ... free-form
//
// The mask follows Hugging Face's attention_mask and package nvib's
// convention: 1 marks a real component, 0 a padding component, and the prior
// component 0 is always real. Files written before this convention hold a
// tensor "mask" with the opposite meaning, 1 for padding: [ReadPosteriors]
// rejects them with an error that says so instead of misreading them.
//
// Slices are row-major. Use [NewPosteriors] to allocate, and
// [Posteriors.Validate] before use; ReadPosteriors validates.
type Posteriors struct {
	M, N, P int
	Mu      []float32 // [M, N, P]
	Logvar  []float32 // [M, N, P]
	Alpha   []float32 // [M, N]
	// AttentionMask is [M, N] or nil: 1 = real component, 0 = padding.
	AttentionMask []uint8
	PriorMu       []float64 // [P]
	PriorVar      []float64 // [P], > 0
	// Metadata are free-form strings saved in __metadata__ (prior_mu and
	// prior_var are written from the fields above and override entries here).
	Metadata map[string]string
}

// NewPosteriors allocates zeroed posteriors with a standard normal prior,
// prior_mu = 0 and prior_var = 1, and no mask.
func NewPosteriors(m, n, p int) *Posteriors {
	po := &Posteriors{M: m, N: n, P: p,
		Mu: make([]float32, m*n*p), Logvar: make([]float32, m*n*p), Alpha: make([]float32, m*n),
		PriorMu: make([]float64, p), PriorVar: make([]float64, p), Metadata: map[string]string{}}
	for i := range po.PriorVar {
		po.PriorVar[i] = 1
	}
	return po
}

// View returns example m as a [PosteriorView] whose slices alias p.
func (p *Posteriors) View(m int) PosteriorView {
	np := p.N * p.P
	v := PosteriorView{N: p.N, P: p.P, Mu: p.Mu[m*np : (m+1)*np], Logvar: p.Logvar[m*np : (m+1)*np], Alpha: p.Alpha[m*p.N : (m+1)*p.N]}
	if p.AttentionMask != nil {
		v.AttentionMask = p.AttentionMask[m*p.N : (m+1)*p.N]
	}
	return v
}

// MaxAbsLogvar bounds |logvar|: beyond it sigma^2 = exp(logvar), about 1e304
// or 1e-304, overflows or underflows the bound's float64 arithmetic.
const MaxAbsLogvar = 700

// Validate checks the shapes; that mu, logvar and alpha hold no NaN or Inf;
// |logvar| <= MaxAbsLogvar; alpha >= 0; mask values in {0, 1}; a finite
// prior_mu; and prior_var > 0. The error names the tensor and the first
// offending index. Every finite float32 mu is accepted: the bound is computed
// in float64, where the square of any float32 difference is finite.
func (p *Posteriors) Validate() error {
	if p.M < 1 || p.N < 1 || p.P < 1 {
		return fmt.Errorf("posteriors: empty shape M=%d N=%d P=%d", p.M, p.N, p.P)
	}
	if len(p.Mu) != p.M*p.N*p.P {
		return fmt.Errorf("tensor mu: %d values, want M*N*P = %d*%d*%d", len(p.Mu), p.M, p.N, p.P)
	}
	if len(p.Logvar) != len(p.Mu) {
		return fmt.Errorf("tensor logvar: %d values, want M*N*P = %d*%d*%d", len(p.Logvar), p.M, p.N, p.P)
	}
	if len(p.Alpha) != p.M*p.N {
		return fmt.Errorf("tensor alpha: %d values, want M*N = %d*%d", len(p.Alpha), p.M, p.N)
	}
	if p.AttentionMask != nil && len(p.AttentionMask) != p.M*p.N {
		return fmt.Errorf("tensor %s: %d values, want M*N = %d*%d", AttentionMaskTensor, len(p.AttentionMask), p.M, p.N)
	}
	idx := func(k, rank int) string {
		if rank == 2 {
			return fmt.Sprintf("[example %d, component %d]", k/p.N, k%p.N)
		}
		return fmt.Sprintf("[example %d, component %d, dim %d]", k/(p.N*p.P), (k/p.P)%p.N, k%p.P)
	}
	for _, t := range []struct {
		name string
		v    []float32
	}{{"mu", p.Mu}, {"logvar", p.Logvar}} {
		for k, v := range t.v {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("tensor %s: non-finite value %v at %s", t.name, v, idx(k, 3))
			}
		}
	}
	for k, v := range p.Logvar {
		if math.Abs(float64(v)) > MaxAbsLogvar {
			return fmt.Errorf("tensor logvar: value %v at %s: sigma^2 = exp(logvar) leaves float64's normal range (|logvar| must be <= %v)",
				v, idx(k, 3), MaxAbsLogvar)
		}
	}
	for k, v := range p.Alpha {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("tensor alpha: non-finite value %v at %s", v, idx(k, 2))
		}
		if v < 0 {
			return fmt.Errorf("tensor alpha: negative pseudo-count %v at %s", v, idx(k, 2))
		}
	}
	for k, v := range p.AttentionMask {
		if v > 1 {
			return fmt.Errorf("tensor %s: value %d at %s, want 0 or 1", AttentionMaskTensor, v, idx(k, 2))
		}
		if k%p.N == 0 && v != 1 {
			return fmt.Errorf("tensor %s: the prior component is marked padding at %s (1 = real component, 0 = padding)", AttentionMaskTensor, idx(k, 2))
		}
	}
	if len(p.PriorMu) != p.P || len(p.PriorVar) != p.P {
		return fmt.Errorf("posteriors: prior_mu/prior_var have %d/%d values, want P = %d", len(p.PriorMu), len(p.PriorVar), p.P)
	}
	for j := range p.PriorVar {
		if !(p.PriorVar[j] > 0) || math.IsInf(p.PriorVar[j], 0) || math.IsNaN(p.PriorMu[j]) || math.IsInf(p.PriorMu[j], 0) {
			return fmt.Errorf("posteriors: prior dimension %d: prior_mu %v, prior_var %v (want finite, prior_var > 0)", j, p.PriorMu[j], p.PriorVar[j])
		}
	}
	return nil
}

// Tensor names of the mask in a posterior file. AttentionMaskTensor, with 1
// for a real component, is used since the mask convention was unified.
// legacyMaskTensor, with 1 for a padding component, is found in older files,
// which are rejected.
const (
	AttentionMaskTensor = "attention_mask"
	legacyMaskTensor    = "mask"
)

// parsePrior reads the metadata value s of key: a number, or a JSON array of
// p numbers. Errors name the key: not a number, a wrong length, null in
// the array (never read as 0).
func parsePrior(key, s string, p int) ([]float64, error) {
	s = strings.TrimSpace(s)
	out := make([]float64, p)
	if strings.HasPrefix(s, "[") {
		var arr []*float64
		if err := json.Unmarshal([]byte(s), &arr); err != nil {
			return nil, fmt.Errorf("metadata %s: %w", key, err)
		}
		if len(arr) != p {
			return nil, fmt.Errorf("metadata %s: %d values, want P = %d", key, len(arr), p)
		}
		for j, v := range arr {
			if v == nil {
				return nil, fmt.Errorf("metadata %s: dim %d is null, want a number", key, j)
			}
			out[j] = *v
		}
		return out, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("metadata %s: %q is neither a number nor a JSON array", key, excerpt(s))
	}
	for i := range out {
		out[i] = v
	}
	return out, nil
}

// excerpt is s cut to 40 bytes for an error message.
func excerpt(s string) string {
	return excerptpkg.Cut(s, 40)
}

func formatPrior(v []float64) string {
	same := true
	for _, x := range v {
		same = same && x == v[0]
	}
	if same && len(v) > 0 {
		return strconv.FormatFloat(v[0], 'g', -1, 64)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// ReadPosteriors reads and validates a posterior file, as [ParsePosteriors]
// does; [Posteriors] describes the contract. Its errors name the file and
// the tensor; nothing is guessed.
func ReadPosteriors(path string) (*Posteriors, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("posteriors: %w", err)
	}
	return ParsePosteriors(path, data)
}

// ParsePosteriors reads and validates a posterior file held in data; name is
// the file for errors. It reads the float32 tensors mu, logvar and alpha, of
// shapes [M N P], [M N P] and [M N]; an optional uint8 mask of shape [M N];
// and the metadata prior_mu and prior_var; then it calls
// [Posteriors.Validate].
//
// Its errors name the file and the tensor or metadata key: a missing tensor,
// a wrong dtype or shape, a tensor whose bytes do not match its shape, null
// in a prior array, and any value Validate rejects.
func ParsePosteriors(name string, data []byte) (*Posteriors, error) {
	return parsePosteriors(name, data, false)
}

// parsePosteriors is ParsePosteriors; with alias, the float32 and mask
// tensors alias data where its layout allows (aligned, little-endian host:
// MapPosteriors) instead of being copied.
func parsePosteriors(name string, data []byte, alias bool) (*Posteriors, error) {
	wrap := func(err error) error { return fmt.Errorf("posteriors %s: %w", name, err) }
	f, err := safetensors.Parse(data)
	if err != nil {
		return nil, wrap(err)
	}
	mu, lv, al, err := posteriorTensors(f)
	if err != nil {
		return nil, wrap(err)
	}
	m, n, pp := mu.Shape[0], mu.Shape[1], mu.Shape[2]
	po := &Posteriors{M: m, N: n, P: pp, Metadata: f.Metadata}
	f32 := func(t *safetensors.Tensor) []float32 {
		if v := aliasFloat32(t.Data); alias && v != nil {
			return v
		}
		v, _ := t.Float32() // checkBytes: the bytes match the shape
		return v
	}
	po.Mu, po.Logvar, po.Alpha = f32(mu), f32(lv), f32(al)
	if po.AttentionMask, err = attentionMask(f, m, n, alias); err != nil {
		return nil, wrap(err)
	}
	if po.PriorMu, po.PriorVar, err = priors(f.Metadata, pp); err != nil {
		return nil, wrap(err)
	}
	if err := po.Validate(); err != nil {
		return nil, wrap(err)
	}
	return po, nil
}

// posteriorTensor is f's tensor name, which must have dtype dt, rank rank
// and the bytes of its shape.
func posteriorTensor(f *safetensors.File, name string, dt safetensors.DType, rank int) (*safetensors.Tensor, error) {
	t, ok := f.Get(name)
	if !ok {
		return nil, fmt.Errorf("tensor %s missing", name)
	}
	if t.DType != dt {
		return nil, fmt.Errorf("tensor %s: dtype %s, want %s", name, t.DType, dt)
	}
	if len(t.Shape) != rank {
		return nil, fmt.Errorf("tensor %s: shape %v, want rank %d", name, t.Shape, rank)
	}
	if err := checkBytes(t); err != nil {
		return nil, err
	}
	return t, nil
}

// posteriorTensors are f's tensors mu, logvar and alpha, in that order,
// then checked against mu's shape [M N P]: logvar [M N P], alpha [M N].
func posteriorTensors(f *safetensors.File) (mu, lv, al *safetensors.Tensor, err error) {
	if mu, err = posteriorTensor(f, "mu", safetensors.F32, 3); err != nil {
		return nil, nil, nil, err
	}
	if lv, err = posteriorTensor(f, "logvar", safetensors.F32, 3); err != nil {
		return nil, nil, nil, err
	}
	if al, err = posteriorTensor(f, "alpha", safetensors.F32, 2); err != nil {
		return nil, nil, nil, err
	}
	m, n, pp := mu.Shape[0], mu.Shape[1], mu.Shape[2]
	if lv.Shape[0] != m || lv.Shape[1] != n || lv.Shape[2] != pp {
		return nil, nil, nil, fmt.Errorf("tensor logvar: shape %v, want mu's shape %v", lv.Shape, mu.Shape)
	}
	if al.Shape[0] != m || al.Shape[1] != n {
		return nil, nil, nil, fmt.Errorf("tensor alpha: shape %v, want [%d %d] (M, N of mu)", al.Shape, m, n)
	}
	return mu, lv, al, nil
}

// attentionMask is f's optional attention mask (nil: none), U8 or BOOL of
// shape [m n]; a file with the legacy mask is an error. With alias, the mask
// aliases f's data.
func attentionMask(f *safetensors.File, m, n int, alias bool) ([]uint8, error) {
	if _, ok := f.Get(legacyMaskTensor); ok {
		return nil, fmt.Errorf("tensor %s: the file uses the old mask convention (1 = padding component); the format now stores %s "+
			"(1 = real component, Hugging Face's convention): re-export the posteriors from the model", legacyMaskTensor, AttentionMaskTensor)
	}
	mk, ok := f.Get(AttentionMaskTensor)
	if !ok {
		return nil, nil
	}
	if mk.DType != safetensors.U8 && mk.DType != safetensors.BOOL {
		return nil, fmt.Errorf("tensor %s: dtype %s, want U8", AttentionMaskTensor, mk.DType)
	}
	if len(mk.Shape) != 2 || mk.Shape[0] != m || mk.Shape[1] != n {
		return nil, fmt.Errorf("tensor %s: shape %v, want [%d %d]", AttentionMaskTensor, mk.Shape, m, n)
	}
	if err := checkBytes(mk); err != nil {
		return nil, err
	}
	if alias && len(mk.Data) > 0 {
		return mk.Data, nil // one byte per value: U8 and BOOL alike
	}
	v, _ := mk.Uint8()
	return v, nil
}

// priors are the metadata prior_mu and prior_var (in that order), each P
// numbers.
func priors(meta map[string]string, p int) (mu, v []float64, err error) {
	for _, key := range []string{"prior_mu", "prior_var"} {
		s, ok := meta[key]
		if !ok {
			return nil, nil, fmt.Errorf("metadata %s missing", key)
		}
		x, err := parsePrior(key, s, p)
		if err != nil {
			return nil, nil, err
		}
		if key == "prior_mu" {
			mu = x
		} else {
			v = x
		}
	}
	return mu, v, nil
}

// checkBytes checks that t's data holds exactly the elements of its shape
// (the product computed without overflow), before they are converted.
func checkBytes(t *safetensors.Tensor) error {
	n := 1
	for _, d := range t.Shape {
		if d < 0 || (d > 0 && n > math.MaxInt/d) {
			return fmt.Errorf("tensor %s: shape %v overflows", t.Name, t.Shape)
		}
		n *= d
	}
	if size := t.DType.Size(); n > len(t.Data)/size || n*size != len(t.Data) {
		return fmt.Errorf("tensor %s: shape %v of %s does not match its %d bytes", t.Name, t.Shape, t.DType, len(t.Data))
	}
	return nil
}

// FileMetadata returns the metadata that a posterior file of p holds, as
// [ReadPosteriors] returns it: p.Metadata, with prior_mu and prior_var
// written from the fields.
func (p *Posteriors) FileMetadata() map[string]string {
	md := make(map[string]string, len(p.Metadata)+2)
	for k, v := range p.Metadata {
		md[k] = v
	}
	md["prior_mu"] = formatPrior(p.PriorMu)
	md["prior_var"] = formatPrior(p.PriorVar)
	return md
}

// WritePosteriors validates p and writes it atomically as a safetensors file.
func WritePosteriors(path string, p *Posteriors) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("posteriors %s: %w", path, err)
	}
	md := p.FileMetadata()
	ts := []*safetensors.Tensor{
		safetensors.FromFloat32("mu", []int{p.M, p.N, p.P}, p.Mu),
		safetensors.FromFloat32("logvar", []int{p.M, p.N, p.P}, p.Logvar),
		safetensors.FromFloat32("alpha", []int{p.M, p.N}, p.Alpha),
	}
	if p.AttentionMask != nil {
		ts = append(ts, safetensors.FromUint8(AttentionMaskTensor, []int{p.M, p.N}, p.AttentionMask))
	}
	if err := safetensors.WriteFile(path, ts, md); err != nil {
		return fmt.Errorf("posteriors: %w", err)
	}
	return nil
}

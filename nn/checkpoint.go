package nn

import (
	"encoding"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nvdp-project/nvdp/safetensors"
)

// Checkpoint layout. A checkpoint is one safetensors file with:
//   - every parameter as an F32 tensor under its own name, so the file is
//     also a plain weights file loadable by name;
//   - with an optimizer, its moments as "optimizer.exp_avg.<name>" and
//     "optimizer.exp_avg_sq.<name>", torch's state names;
//   - metadata: the caller's map plus the reserved keys "nn.format",
//     "nn.optimizer", "nn.adamw.step", "nn.adamw.lr", "nn.adamw.beta1",
//     "nn.adamw.beta2", "nn.adamw.eps" and "nn.adamw.weight_decay".
const (
	ckptFormat    = "nvdp-nn-checkpoint-v1"
	ckptMPrefix   = "optimizer.exp_avg."
	ckptVPrefix   = "optimizer.exp_avg_sq."
	ckptMetaSpace = "nn."
)

// SaveCheckpoint writes params, the AdamW state and meta to path as
// safetensors. opt may be nil, for weights only. meta holds arbitrary
// strings, such as the epoch, the data order or an RNG state from
// [RNGState]; keys starting with "nn." are reserved.
//
// The write is atomic, through a temporary file in the same directory,
// fsync and rename, so a crash leaves either the old or the new checkpoint.
//
// SaveCheckpoint returns an error for duplicate parameter names, reserved
// metadata keys, or an I/O failure.
func SaveCheckpoint(path string, params []*Param, opt *AdamW, meta map[string]string) error {
	if _, err := ParamMap(params); err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	md := map[string]string{}
	for k, v := range meta {
		if strings.HasPrefix(k, ckptMetaSpace) {
			return fmt.Errorf("checkpoint %s: metadata key %q uses the reserved prefix %q", path, k, ckptMetaSpace)
		}
		md[k] = v
	}
	md["nn.format"] = ckptFormat
	ts := make([]*safetensors.Tensor, 0, 3*len(params))
	for _, p := range params {
		if strings.HasPrefix(p.Name, "optimizer.") {
			return fmt.Errorf("checkpoint %s: parameter name %q uses the reserved prefix \"optimizer.\"", path, p.Name)
		}
		ts = append(ts, safetensors.FromFloat32(p.Name, p.Value.Shape, p.Value.Data))
	}
	if opt != nil {
		md["nn.optimizer"] = "adamw"
		md["nn.adamw.step"] = strconv.Itoa(opt.Step)
		for k, v := range map[string]float64{"lr": opt.LR, "beta1": opt.Beta1, "beta2": opt.Beta2, "eps": opt.Eps, "weight_decay": opt.WeightDecay} {
			md["nn.adamw."+k] = strconv.FormatFloat(v, 'g', -1, 64)
		}
		for _, p := range params {
			m, v := opt.M[p.Name], opt.V[p.Name]
			if m == nil { // not yet updated: zero moments, as torch's lazily created state
				m, v = make([]float32, p.Value.Len()), make([]float32, p.Value.Len())
			}
			ts = append(ts, safetensors.FromFloat32(ckptMPrefix+p.Name, p.Value.Shape, m),
				safetensors.FromFloat32(ckptVPrefix+p.Name, p.Value.Shape, v))
		}
	}
	if err := safetensors.WriteFile(path, ts, md); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// LoadCheckpoint restores params, matched by name, from a file written by
// [SaveCheckpoint], and returns the caller's metadata without the reserved
// "nn." keys. When opt is not nil it also restores the AdamW moments and
// step. The AdamW hyperparameters are the caller's; the saved ones are
// informational.
//
// Nothing is modified unless the whole file validates. The errors name the
// tensor: a parameter missing from the file, a tensor in the file that is
// no parameter, a shape mismatch, non-finite values, or a missing optimizer
// state when opt is not nil.
func LoadCheckpoint(path string, params []*Param, opt *AdamW) (map[string]string, error) {
	pm, err := ParamMap(params)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	f, err := safetensors.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if f.Metadata["nn.format"] != ckptFormat {
		return nil, fmt.Errorf("checkpoint %s: not an nvdp checkpoint (metadata nn.format = %q, want %q)", path, f.Metadata["nn.format"], ckptFormat)
	}
	values, moments, err := readCheckpointTensors(path, f, pm, opt != nil)
	if err != nil {
		return nil, err
	}
	for _, p := range params {
		if values[p.Name] == nil {
			return nil, fmt.Errorf("checkpoint %s: parameter %q missing", path, p.Name)
		}
	}
	step := 0
	if opt != nil {
		if step, err = checkOptimizerState(path, f.Metadata, params, moments); err != nil {
			return nil, err
		}
	}
	// Everything validated: apply.
	applyCheckpoint(params, opt, values, moments, step)
	return callerMetadata(f.Metadata), nil
}

// readCheckpointTensors checks every tensor of f against the parameter of
// its name (pm; an optimizer moment's name without its prefix) and returns
// the parameter values and, withOpt, the optimizer moments, finite, by
// tensor name.
func readCheckpointTensors(path string, f *safetensors.File, pm map[string]*Param, withOpt bool) (values, moments map[string][]float32, err error) {
	values = map[string][]float32{}
	moments = map[string][]float32{}
	for _, t := range f.Tensors {
		name, isOpt := t.Name, false
		if s, ok := strings.CutPrefix(t.Name, ckptVPrefix); ok {
			name, isOpt = s, true
		} else if s, ok := strings.CutPrefix(t.Name, ckptMPrefix); ok {
			name, isOpt = s, true
		}
		p, ok := pm[name]
		if !ok {
			return nil, nil, fmt.Errorf("checkpoint %s: tensor %q matches no model parameter", path, t.Name)
		}
		if !slices.Equal(t.Shape, p.Value.Shape) {
			return nil, nil, fmt.Errorf("checkpoint %s: tensor %q has shape %v, parameter wants %v", path, t.Name, t.Shape, p.Value.Shape)
		}
		if isOpt && !withOpt {
			continue
		}
		data, err := t.Float32()
		if err != nil {
			return nil, nil, fmt.Errorf("checkpoint %s: %w", path, err)
		}
		if err := CheckFinite(t.Name, FromData(data, t.Shape...)); err != nil {
			return nil, nil, fmt.Errorf("checkpoint %s: %w", path, err)
		}
		if isOpt {
			moments[t.Name] = data
		} else {
			values[t.Name] = data
		}
	}
	return values, moments, nil
}

// checkOptimizerState checks that the checkpoint holds AdamW's state (its
// step, then both moments of every parameter) and returns the step.
func checkOptimizerState(path string, md map[string]string, params []*Param, moments map[string][]float32) (int, error) {
	if md["nn.optimizer"] != "adamw" {
		return 0, fmt.Errorf("checkpoint %s: no AdamW state (weights-only checkpoint)", path)
	}
	step, err := strconv.Atoi(md["nn.adamw.step"])
	if err != nil || step < 0 {
		return 0, fmt.Errorf("checkpoint %s: bad metadata nn.adamw.step %q", path, md["nn.adamw.step"])
	}
	for _, p := range params {
		for _, n := range []string{ckptMPrefix + p.Name, ckptVPrefix + p.Name} {
			if moments[n] == nil {
				return 0, fmt.Errorf("checkpoint %s: optimizer tensor %q missing", path, n)
			}
		}
	}
	return step, nil
}

// applyCheckpoint copies the validated values into params and, when opt is
// not nil, sets its step and moments.
func applyCheckpoint(params []*Param, opt *AdamW, values, moments map[string][]float32, step int) {
	for _, p := range params {
		copy(p.Value.Data, values[p.Name])
	}
	if opt != nil {
		opt.Step = step
		opt.M, opt.V = map[string][]float32{}, map[string][]float32{}
		for _, p := range params {
			opt.M[p.Name] = moments[ckptMPrefix+p.Name]
			opt.V[p.Name] = moments[ckptVPrefix+p.Name]
		}
	}
}

// callerMetadata is md without the reserved "nn." keys.
func callerMetadata(md map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range md {
		if !strings.HasPrefix(k, ckptMetaSpace) {
			out[k] = v
		}
	}
	return out
}

// RNGState encodes a random source's state as base64 text for checkpoint
// metadata. The source may be a *rand.PCG or *rand.ChaCha8 from
// math/rand/v2, both BinaryMarshalers. A *rand.Rand holds no state of its
// own beyond its source, so saving the source suffices.
func RNGState(src encoding.BinaryMarshaler) (string, error) {
	b, err := src.MarshalBinary()
	if err != nil {
		return "", fmt.Errorf("rng state: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// RestoreRNG sets src to a state produced by [RNGState].
func RestoreRNG(state string, src encoding.BinaryUnmarshaler) error {
	b, err := base64.StdEncoding.DecodeString(state)
	if err != nil {
		return fmt.Errorf("rng state: %w", err)
	}
	if err := src.UnmarshalBinary(b); err != nil {
		return fmt.Errorf("rng state: %w", err)
	}
	return nil
}

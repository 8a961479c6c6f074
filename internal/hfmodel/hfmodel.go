// Package hfmodel reads what Hugging Face model directories share across
// architectures (the BERT-family encoders of package encoder and
// package wav2vec2): a config.json through the architecture's parser, and
// a model.safetensors file into named parameters, validated as a whole
// before any parameter is changed.
package hfmodel

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/safetensors"
)

// ReadConfig reads a config.json file and parses it with parse; errors
// name the file.
func ReadConfig[C any](path string, parse func([]byte) (C, error)) (C, error) {
	var zero C
	data, err := os.ReadFile(path)
	if err != nil {
		return zero, fmt.Errorf("config: %w", err)
	}
	c, err := parse(data)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Names says how a checkpoint's tensor names map to a model's parameters.
type Names struct {
	// Canonical maps a tensor name to a parameter name; ok false marks a
	// tensor the model ignores (a task head), counted and logged at debug level.
	Canonical func(name string) (canon string, ok bool)
	// Strict are the canonical-name prefixes of the model's own tensors: an
	// unknown tensor under one of them is an error (a checkpoint of another
	// shape); an unknown tensor elsewhere is logged and ignored.
	Strict []string
	// Optional are tensors that are not parameters but are read when present
	// (buffers), by canonical name with their shape.
	Optional map[string][]int
	// Model describes the model in errors ("... is not a parameter of this
	// <Model>"); Kind names its tensors ("missing <Kind> tensor(s) ...").
	Model, Kind string
}

// LoadWeights copies the tensors of a safetensors file into params,
// matched by n.Canonical, and returns the Optional tensors present. F16,
// BF16 and F64 storage is converted to float32. No parameter is changed
// unless the whole file validates. Errors name the file and the tensor: a
// parameter missing, an unknown tensor under a Strict prefix, two tensors
// mapping to one name, a shape mismatch, a non-float dtype or a non-finite
// value.
func LoadWeights(path string, params []*nn.Param, n Names) (map[string][]float32, error) {
	values, optional, err := ReadWeights(path, params, n)
	if err != nil {
		return nil, err
	}
	for _, p := range params {
		copy(p.Value.Data, values[p.Name])
	}
	return optional, nil
}

// ReadWeights is LoadWeights without the copy: the parameters' values and
// the Optional tensors present, by canonical name, for callers with checks
// of their own before applying them.
func ReadWeights(path string, params []*nn.Param, n Names) (values, optional map[string][]float32, err error) {
	f, err := safetensors.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	pm, err := nn.ParamMap(params)
	if err != nil {
		return nil, nil, err
	}
	values = make(map[string][]float32, len(pm))
	optional = map[string][]float32{}
	from := make(map[string]string, len(pm)) // canonical name -> tensor name
	ignored := 0
	for _, t := range f.Tensors {
		canon, ok := n.Canonical(t.Name)
		if !ok {
			ignored++
			continue
		}
		var want []int
		if p, isParam := pm[canon]; isParam {
			want = p.Value.Shape
		} else if shape, isOpt := n.Optional[canon]; isOpt {
			want = shape
		} else {
			if hasAnyPrefix(canon, n.Strict) {
				return nil, nil, fmt.Errorf("%s: tensor %q is not a parameter of this %s", path, t.Name, n.Model)
			}
			slog.Warn("ignoring non-encoder tensor", "file", path, "tensor", t.Name)
			continue
		}
		if prev, dup := from[canon]; dup {
			return nil, nil, fmt.Errorf("%s: tensors %q and %q both map to parameter %s", path, prev, t.Name, canon)
		}
		if !slices.Equal(t.Shape, want) {
			return nil, nil, fmt.Errorf("%s: tensor %q has shape %v, the config needs %v", path, t.Name, t.Shape, want)
		}
		data, err := t.Float32()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		if err := nn.CheckFinite(t.Name, nn.FromData(data, t.Shape...)); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		from[canon] = t.Name
		if _, isParam := pm[canon]; isParam {
			values[canon] = data
		} else {
			optional[canon] = data
		}
	}
	var missing []string
	for name := range pm {
		if values[name] == nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		more := ""
		if len(missing) > 5 {
			more = fmt.Sprintf(" and %d more", len(missing)-5)
			missing = missing[:5]
		}
		return nil, nil, fmt.Errorf("%s: missing %s tensor(s) %s%s", path, n.Kind, strings.Join(missing, ", "), more)
	}
	if ignored > 0 {
		slog.Debug("ignored task-head tensors", "file", path, "count", ignored)
	}
	return values, optional, nil
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

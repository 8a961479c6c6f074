package serve

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
)

// appendEmbedResponse appends r to b as JSON, byte for byte what
// [json.Marshal] writes for it, without reflection over its arrays: a
// release is N x P float32 values (65 x 128 for the main job's model), and
// encoding/json spends a third of its time there besides formatting the
// numbers. The privacy block goes through json.Marshal. A non-finite value
// is an error, as json.Marshal's.
func appendEmbedResponse(b []byte, r *EmbedResponse) ([]byte, error) {
	b, err := appendArray(append(b, `{"embeddings":`...), r.Embeddings, func(b []byte, rows [][]float32) ([]byte, error) {
		return appendArray(b, rows, appendFloats)
	})
	if err != nil {
		return b, err
	}
	if b, err = appendArray(append(b, `,"weights":`...), r.Weights, appendFloats); err != nil {
		return b, err
	}
	p, err := json.Marshal(&r.Privacy)
	if err != nil {
		return b, err
	}
	b = append(append(b, `,"privacy":`...), p...)
	return append(b, '}'), nil
}

// appendArray appends v as a JSON array, each element by elem, or null for
// a nil slice, as encoding/json writes a slice.
func appendArray[T any](b []byte, v []T, elem func([]byte, T) ([]byte, error)) ([]byte, error) {
	if v == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '[')
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = elem(b, x); err != nil {
			return b, err
		}
	}
	return append(b, ']'), nil
}

// appendFloats appends v as a JSON array ([appendArray]) of float32 values
// ([appendFloat32]).
func appendFloats(b []byte, v []float32) ([]byte, error) { return appendArray(b, v, appendFloat32) }

// appendFloat32 appends x as encoding/json writes a float32: the shortest
// decimal that reads back as it, in %f form, or %e form below 1e-6 and
// from 1e21 on with the exponent unpadded ("1e-7", not "1e-07"). A
// non-finite x is an error, as json.Marshal's.
func appendFloat32(b []byte, x float32) ([]byte, error) {
	f := float64(x)
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, &json.UnsupportedValueError{Str: strconv.FormatFloat(f, 'g', -1, 32)}
	}
	format := byte('f')
	if abs := float32(math.Abs(f)); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 32)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	return b, nil
}

// writeEmbedJSON writes r as the JSON body of a 200, as writeJSON would
// (the same bytes, built before anything is sent), in memory from the
// pool of response bodies ([writeBody]).
func writeEmbedJSON(w http.ResponseWriter, r *EmbedResponse) {
	err := writeBody(w, "application/json", func(body []byte) ([]byte, error) {
		body, err := appendEmbedResponse(body, r)
		return append(body, '\n'), err
	})
	if err != nil {
		panic(fmt.Sprintf("serve: response: %v", err)) // released values are finite (release.checkFinite)
	}
}

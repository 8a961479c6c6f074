package serve

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/release"
	"github.com/nvdp-project/nvdp/safetensors"
)

// MediaSafetensors is the media type of the binary response of POST /v1/embed: a safetensors
// file with the tensors and metadata of `nvdp embed`'s output, as [release.FormatSafetensors]
// writes it.
//
// No media type is registered for safetensors: its maintainers left a request to register
// application/vnd.huggingface.safetensors unanswered in safetensors issue 486, and note in
// issue 743 that files are served as application/octet-stream. A client cannot tell a
// safetensors body from any other by application/octet-stream, so the service names the
// format in the vendor tree, as the issue that asked for the response proposed;
// docs/serving.md, "The binary response".
const MediaSafetensors = "application/vnd.safetensors"

// mediaJSON is the default response type.
const mediaJSON = "application/json"

// acceptsSafetensors decides the response type of POST /v1/embed from the request's Accept header
// fields (RFC 9110 §12.5.1): safetensors when its quality is above JSON's, JSON otherwise, so that
// no Accept, "*/*" and equal qualities give JSON. A media range's quality applies to the types it
// matches, the most specific range deciding. ok is false when the header accepts neither type (406).
// Parameters other than q are ignored; a range that does not parse, or whose q is not in [0, 1],
// is skipped, and a header with no valid range is ignored (JSON).
func acceptsSafetensors(fields []string) (binary, ok bool) {
	if len(fields) == 0 {
		return false, true
	}
	qJSON, qST := -1.0, -1.0 // the quality of each type; -1: no range matched it yet
	specJSON, specST := -1, -1
	parsed := false
	for _, field := range fields {
		for _, item := range strings.Split(field, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			mt, params, err := mime.ParseMediaType(item)
			if err != nil {
				continue
			}
			q := 1.0
			if s, ok := params["q"]; ok {
				v, err := strconv.ParseFloat(s, 64)
				if err != nil || v < 0 || v > 1 {
					continue
				}
				q = v
			}
			parsed = true
			if sp := rangeMatch(mt, mediaJSON); sp > specJSON {
				specJSON, qJSON = sp, q
			}
			if sp := rangeMatch(mt, MediaSafetensors); sp > specST {
				specST, qST = sp, q
			}
		}
	}
	if !parsed { // a header of nothing valid is ignored (RFC 9110 §12.5.1)
		return false, true
	}
	if qJSON <= 0 && qST <= 0 {
		return false, false
	}
	return qST > qJSON, true
}

// rangeMatch is how specifically the media range r matches the type typ: 2 for typ itself, 1 for
// its "type/*", 0 for "*/*", -1 for no match.
func rangeMatch(r, typ string) int {
	switch {
	case r == typ:
		return 2
	case r == "*/*":
		return 0
	case strings.HasSuffix(r, "/*") && strings.HasPrefix(typ, strings.TrimSuffix(r, "*")):
		return 1
	}
	return -1
}

// writeSafetensors writes the releases embs as a safetensors body: z [texts, 1, N, P] and
// pi [texts, 1, N] in float32, as `nvdp embed` writes one release per text, with release.Metadata's
// keys (format, model, layout, guarantee, guarantee_per_text, counts, seeded) and the response's
// privacy block under "privacy" (the JSON of [Privacy]: the guarantee, the balance and the release
// mechanism). The body's length depends only on the number of texts and the metadata.
func (s *Server) writeSafetensors(w http.ResponseWriter, embs []Embedding, priv Privacy) error {
	m := len(embs)
	pb, err := json.Marshal(priv)
	if err != nil {
		return err
	}
	keys := map[string]string{"texts": strconv.Itoa(m), "releases": strconv.Itoa(m), "privacy": string(pb)} // one release per text
	zBytes := int64(m) * int64(s.n*s.p*4)
	piBytes := int64(m) * int64(s.n*4)
	hdr, err := safetensors.EncodeHeaderShared([]safetensors.HeaderEntry{
		{Name: "z", DType: safetensors.F32, Shape: []int{m, 1, s.n, s.p}, DataOffsets: [2]int64{0, zBytes}},
		{Name: "pi", DType: safetensors.F32, Shape: []int{m, 1, s.n}, DataOffsets: [2]int64{zBytes, zBytes + piBytes}},
	}, s.binaryKeys, keys)
	if err != nil {
		return err
	}
	return writeBody(w, MediaSafetensors, func(body []byte) ([]byte, error) {
		body = slices.Grow(body, 8+len(hdr)+int(zBytes+piBytes))
		body = binary.LittleEndian.AppendUint64(body, uint64(len(hdr)))
		body = append(body, hdr...)
		for _, e := range embs {
			body = appendFloat32s(body, e.Z)
		}
		for _, e := range embs {
			body = appendFloat32s(body, e.Pi)
		}
		return body, nil
	})
}

// writeBody writes the body build appends to its argument, an empty buffer
// from bodies, as a 200 of contentType with its Content-Length, once it is
// whole: nothing is sent when build fails, and its error is returned. The
// buffer goes back to bodies unless it grew beyond maxPooledBody.
func writeBody(w http.ResponseWriter, contentType string, build func(body []byte) ([]byte, error)) error {
	bp, _ := bodies.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	body, err := build((*bp)[:0])
	defer func() {
		if cap(body) <= maxPooledBody {
			*bp = body[:0]
			bodies.Put(bp)
		}
	}()
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	return nil
}

// bodies holds *[]byte: the memory of the embed responses' bodies, binary (about 33 KB a text for
// N 65 and P 128) and JSON (about 100 KB a text), reused by the next response once one is written;
// maxPooledBody bounds what is kept.
var bodies sync.Pool

const maxPooledBody = 8 << 20

// binaryKeys returns the safetensors metadata that every binary response of
// a server of rel shares, encoded: release.Metadata's keys for one release per text
// of guarantee g, with the Releaser's model description (GET /v1/info's)
// under "model"; the counts ("texts", "releases") and "privacy" are each
// response's. New makes it once: it is most of a response's JSON.
func binaryKeys(rel Releaser, g *privacy.Guarantee, seeded bool) (*safetensors.SharedMetadata, error) {
	keys, err := release.NewMetadata(release.ModelInfo{}, g, g, release.FormatSafetensors, 1, seeded).MetadataKeys()
	if err != nil {
		return nil, fmt.Errorf("binary response metadata: %w", err)
	}
	model, err := json.Marshal(rel.Model())
	if err != nil {
		return nil, fmt.Errorf("model description: %w", err)
	}
	keys["model"] = string(model)
	delete(keys, "texts") // each response's, as "privacy"
	delete(keys, "releases")
	return safetensors.NewSharedMetadata(keys), nil
}

// appendFloat32s appends v to b as little-endian float32.
func appendFloat32s(b []byte, v []float32) []byte {
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

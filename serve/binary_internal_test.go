package serve

import "testing"

// TestAcceptsSafetensors: the response type from the Accept header fields, the most specific
// range deciding each type's quality, JSON on ties and by default, 406 when neither is accepted.
func TestAcceptsSafetensors(t *testing.T) {
	cases := []struct {
		accept     []string
		binary, ok bool
	}{
		{nil, false, true},
		{[]string{""}, false, true},
		{[]string{"*/*"}, false, true},
		{[]string{"application/json"}, false, true},
		{[]string{MediaSafetensors}, true, true},
		{[]string{"application/vnd.safetensors; q=0.9, application/json; q=0.5"}, true, true},
		{[]string{"application/json;q=0.9, application/vnd.safetensors;q=0.9"}, false, true},
		{[]string{"application/json, application/vnd.safetensors"}, false, true},
		{[]string{"application/json;q=0", "application/*"}, true, true}, // two fields; JSON refused
		{[]string{"application/*;q=0.2, application/vnd.safetensors"}, true, true},
		{[]string{"application/vnd.safetensors;q=0, */*"}, false, true},
		{[]string{"text/html"}, false, false},
		{[]string{"application/json;q=0, application/vnd.safetensors;q=0"}, false, false},
		{[]string{"application/vnd.safetensors;q=2"}, false, true},   // a quality out of range is skipped,
		{[]string{"application/vnd.safetensors;q=abc"}, false, true}, // as is one that does not parse,
		{[]string{"application/vnd.safetensors;q=2, text/html"}, false, false},
		{[]string{"not a type, application/vnd.safetensors"}, true, true},
	}
	for _, c := range cases {
		b, ok := acceptsSafetensors(c.accept)
		if b != c.binary || ok != c.ok {
			t.Errorf("Accept %q: binary %v ok %v, want %v %v", c.accept, b, ok, c.binary, c.ok)
		}
	}
}

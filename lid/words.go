package lid

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
)

// Word-list kinds of WordSource.
const (
	// Hunspell is a hunspell .dic file at Path: an optional count line, then
	// one stem a line, affix flags after an unescaped "/" and morphological
	// fields after white space, in the encoding its .aff file's SET names.
	Hunspell = "hunspell"
	// Aspell is an aspell dictionary whose name, such as "cy", is Path, read
	// as the output of `aspell -d NAME dump master`.
	Aspell = "aspell"
	// ISOCodes is an iso-codes translation catalogue, a gettext .mo file at
	// Path such as /usr/share/locale/ky/LC_MESSAGES/iso_3166-1.mo: the words
	// of its translated names of countries and languages, for languages
	// without a Debian dictionary.
	ISOCodes = "iso-codes"
)

// WordSource is where the stand-in corpus takes a language's words from.
type WordSource struct {
	Package string   `json:"package"` // the Debian package that ships it
	Kind    string   `json:"kind"`    // Hunspell, Aspell or ISOCodes
	Paths   []string `json:"paths"`   // files (Hunspell, ISOCodes) or one dictionary name (Aspell)
}

// ReadWords returns the distinct words of a source, sorted, each passing
// the word filter: letters and combining marks only, 2 to 24 characters,
// and no upper case after the first character, which keeps out acronyms,
// numbers and abbreviations.
func ReadWords(s WordSource) ([]string, error) {
	var raw []string
	for _, p := range s.Paths {
		var (
			w   []string
			err error
		)
		switch s.Kind {
		case Hunspell:
			w, err = readHunspell(p)
		case Aspell:
			w, err = readAspell(p)
		case ISOCodes:
			w, err = readMO(p)
		default:
			return nil, fmt.Errorf("lid: word source %q: unknown kind %q", p, s.Kind)
		}
		if err != nil {
			return nil, err
		}
		raw = append(raw, w...)
	}
	return filterWords(raw), nil
}

// readHunspell reads the stems of a hunspell .dic file.
func readHunspell(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("lid: word list: %w", err)
	}
	enc, err := hunspellEncoding(strings.TrimSuffix(path, filepath.Ext(path)) + ".aff")
	if err != nil {
		return nil, err
	}
	if enc != nil {
		if data, err = enc.NewDecoder().Bytes(data); err != nil {
			return nil, fmt.Errorf("lid: word list %s: %w", path, err)
		}
	}
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("lid: word list %s: not valid UTF-8 (and its .aff names no other SET)", path)
	}
	return parseDic(string(data)), nil
}

// parseDic returns the stems of a .dic text: per line, the text before the
// first white space, cut at the first "/" not escaped as "\/". A first line
// that is a count is skipped by the word filter (digits).
func parseDic(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if i := strings.IndexFunc(line, unicode.IsSpace); i >= 0 {
			line = line[:i]
		}
		var b strings.Builder
		for i := 0; i < len(line); i++ {
			if line[i] == '\\' && i+1 < len(line) && line[i+1] == '/' {
				b.WriteByte('/')
				i++
				continue
			}
			if line[i] == '/' {
				break
			}
			b.WriteByte(line[i])
		}
		out = append(out, b.String())
	}
	return out
}

// hunspellEncoding returns the decoder of the SET line of an .aff file;
// nil for UTF-8 (or no SET line).
func hunspellEncoding(aff string) (encoding.Encoding, error) {
	data, err := os.ReadFile(aff)
	if err != nil {
		return nil, fmt.Errorf("lid: word list: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "SET" {
			continue
		}
		name := strings.ToUpper(f[1])
		if name == "UTF-8" {
			return nil, nil
		}
		if e, ok := hunspellCharsets[name]; ok {
			return e, nil
		}
		return nil, fmt.Errorf("lid: word list %s: unsupported SET %s", aff, f[1])
	}
	return nil, nil
}

// hunspellCharsets are the SET names hunspell accepts besides UTF-8.
var hunspellCharsets = map[string]encoding.Encoding{
	"ISO8859-1": charmap.ISO8859_1, "ISO8859-2": charmap.ISO8859_2, "ISO8859-3": charmap.ISO8859_3,
	"ISO8859-4": charmap.ISO8859_4, "ISO8859-5": charmap.ISO8859_5, "ISO8859-6": charmap.ISO8859_6,
	"ISO8859-7": charmap.ISO8859_7, "ISO8859-8": charmap.ISO8859_8, "ISO8859-9": charmap.ISO8859_9,
	"ISO8859-10": charmap.ISO8859_10, "ISO8859-13": charmap.ISO8859_13, "ISO8859-14": charmap.ISO8859_14,
	"ISO8859-15": charmap.ISO8859_15, "KOI8-R": charmap.KOI8R, "KOI8-U": charmap.KOI8U,
}

// aspellCommand is the aspell binary (a variable for tests).
var aspellCommand = "aspell"

// readAspell dumps an aspell dictionary's word list.
func readAspell(dict string) ([]string, error) {
	var stderr bytes.Buffer
	cmd := exec.Command(aspellCommand, "-d", dict, "dump", "master")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("lid: word list: aspell -d %s dump master: %w: %s", dict, err, strings.TrimSpace(stderr.String()))
	}
	if !utf8.Valid(out) {
		return nil, fmt.Errorf("lid: word list: aspell -d %s dump master: output is not UTF-8", dict)
	}
	return parseDic(string(out)), nil
}

// readMO returns the words of the translations in a gettext .mo catalogue
// (GNU gettext manual, "The Format of GNU MO Files"): the translated
// strings split at white space and punctuation.
func readMO(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("lid: word list: %w", err)
	}
	msgs, err := parseMO(data)
	if err != nil {
		return nil, fmt.Errorf("lid: word list %s: %w", path, err)
	}
	var out []string
	for _, m := range msgs {
		out = append(out, strings.FieldsFunc(m, func(r rune) bool {
			return !unicode.IsLetter(r) && !unicode.Is(unicode.M, r)
		})...)
	}
	return out, nil
}

// parseMO returns the translated strings of a .mo file (the header entry,
// with an empty original, excluded).
func parseMO(data []byte) ([]string, error) {
	if len(data) < 28 {
		return nil, fmt.Errorf("not a .mo file: %d bytes", len(data))
	}
	var order binary.ByteOrder
	switch binary.LittleEndian.Uint32(data) {
	case 0x950412de:
		order = binary.LittleEndian
	case 0xde120495:
		order = binary.BigEndian
	default:
		return nil, fmt.Errorf("not a .mo file: magic % x", data[:4])
	}
	n := int(order.Uint32(data[8:]))
	orig, trans := int(order.Uint32(data[12:])), int(order.Uint32(data[16:]))
	str := func(table, i int) (string, error) {
		at := table + 8*i
		if table < 0 || at < 0 || at+8 > len(data) {
			return "", fmt.Errorf("string table entry %d beyond the file", i)
		}
		l, off := int(order.Uint32(data[at:])), int(order.Uint32(data[at+4:]))
		if off < 0 || l < 0 || off+l > len(data) {
			return "", fmt.Errorf("string %d (%d bytes at %d) beyond the file", i, l, off)
		}
		return string(data[off : off+l]), nil
	}
	if n < 0 || n > len(data)/8 {
		return nil, fmt.Errorf("%d strings in a %d-byte file", n, len(data))
	}
	var out []string
	for i := 0; i < n; i++ {
		o, err := str(orig, i)
		if err != nil {
			return nil, err
		}
		t, err := str(trans, i)
		if err != nil {
			return nil, err
		}
		if o == "" {
			continue
		}
		if !utf8.ValidString(t) {
			return nil, fmt.Errorf("translation %d is not UTF-8", i)
		}
		out = append(out, strings.Split(t, "\x00")...) // plural forms
	}
	return out, nil
}

// filterWords keeps the distinct words that pass the word filter, sorted.
func filterWords(raw []string) []string {
	seen := map[string]bool{}
	for _, w := range raw {
		if keepWord(w) {
			seen[w] = true
		}
	}
	out := make([]string, 0, len(seen))
	for w := range seen {
		out = append(out, w)
	}
	sort.Strings(out)
	return out
}

func keepWord(w string) bool {
	n := utf8.RuneCountInString(w)
	if n < 2 || n > 24 {
		return false
	}
	for i, r := range w {
		if !unicode.IsLetter(r) && !unicode.Is(unicode.M, r) {
			return false
		}
		if i > 0 && unicode.IsUpper(r) {
			return false
		}
	}
	return true
}

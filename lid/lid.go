// Package lid is the data of spoken language identification (paper §4.3,
// docs/speech.md, "Data"): the CommonLanguage corpus as distributed (Zenodo
// record 5036977, v0.1; the layout Hugging Face's common_language loading
// script reads) and a synthetic stand-in written in the same layout by
// espeak-ng (Synthesize), so that one loader (Load) serves both.
//
// Layout under a root directory (the archive's common_voice_kpd folder):
//
//	<Language>/<split>.csv                          split in train, dev, test
//	<Language>/<split>/<client_id>/<wav file>       the audio a row names
//
// Each CSV is UTF-16 (with a byte-order mark; little-endian without one,
// as Python reads "utf-16" on x86), tab-separated, one header line, then
// rows of six fields: a row index, client_id, the wav file name, sentence,
// age, gender.
package lid

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/nvdp-project/nvdp/internal/excerpt"
)

// languages are CommonLanguage's 45 labels in the order of the HF script's
// _LANGUAGES list (its ClassLabel: label i is languages[i]); the spellings,
// "Mangolian" and "Ukranian" included, are the release's folder names.
var languages = [...]string{
	"Arabic", "Basque", "Breton", "Catalan", "Chinese_China", "Chinese_Hongkong",
	"Chinese_Taiwan", "Chuvash", "Czech", "Dhivehi", "Dutch", "English",
	"Esperanto", "Estonian", "French", "Frisian", "Georgian", "German", "Greek",
	"Hakha_Chin", "Indonesian", "Interlingua", "Italian", "Japanese", "Kabyle",
	"Kinyarwanda", "Kyrgyz", "Latvian", "Maltese", "Mangolian", "Persian",
	"Polish", "Portuguese", "Romanian", "Romansh_Sursilvan", "Russian", "Sakha",
	"Slovenian", "Spanish", "Swedish", "Tamil", "Tatar", "Turkish", "Ukranian",
	"Welsh",
}

// NumLanguages is the number of CommonLanguage labels, the classifier's
// output width.
const NumLanguages = len(languages)

// Languages returns the 45 language names; label i is Languages()[i].
func Languages() []string { return append([]string(nil), languages[:]...) }

// LanguageIndex returns the label of a language folder name, or false when
// the name is not one of the 45.
func LanguageIndex(name string) (int, bool) {
	for i, l := range languages {
		if l == name {
			return i, true
		}
	}
	return 0, false
}

// splits are the split names of the release, in order (HF's train,
// validation, test).
var splits = [...]string{"train", "dev", "test"}

// splitNames returns the split names: train, dev, test.
func splitNames() []string { return append([]string(nil), splits[:]...) }

func checkSplit(split string) error {
	for _, s := range splits {
		if s == split {
			return nil
		}
	}
	return fmt.Errorf("lid: unknown split %q (want one of %s)", split, strings.Join(splits[:], ", "))
}

// csvColumns is the number of fields of every CSV line; the row's fields
// after the index are client_id, path, sentence, age, gender.
const csvColumns = 6

// header is the header line the synthetic corpus writes (the release's own
// header is not checked beyond its field count).
var header = []string{"", "client_id", "path", "sentence", "age", "gender"}

// Row is one line of a split CSV.
type Row struct {
	ClientID string // speaker (CommonVoice client id; the voice in the stand-in)
	Path     string // wav file name, relative to <Language>/<split>/<ClientID>/
	Sentence string
	Age      string
	Gender   string
}

// Utterance is one labelled recording of a split.
type Utterance struct {
	Path     string // audio file: root/<Language>/<split>/<ClientID>/<Row.Path>
	Language int    // label: index into Languages()
	Row
}

// ParseCSV decodes a split CSV: UTF-16, tab-separated, a header and rows of
// six fields. name is used in errors, which give the line number, the
// header being line 1. Errors: odd byte count, an unpaired surrogate, a
// line with another number of fields, an empty client_id or path, a path
// that is not a plain file name, no header.
func ParseCSV(data []byte, name string) ([]Row, error) {
	text, err := decodeUTF16(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	lines := strings.Split(text, "\n")
	if lines[len(lines)-1] == "" { // the final line end
		lines = lines[:len(lines)-1]
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("%s: empty file (no header line)", name)
	}
	var rows []Row
	for i, line := range lines {
		line = strings.TrimSuffix(line, "\r")
		f := strings.Split(line, "\t")
		if len(f) != csvColumns {
			return nil, fmt.Errorf("%s: line %d: %d tab-separated fields, want %d: %s",
				name, i+1, len(f), csvColumns, excerpt.Quote(line))
		}
		if i == 0 {
			continue
		}
		r := Row{ClientID: f[1], Path: f[2], Sentence: f[3], Age: f[4], Gender: f[5]}
		if err := checkPathElem(r.ClientID); err != nil {
			return nil, fmt.Errorf("%s: line %d: client_id: %w", name, i+1, err)
		}
		if err := checkPathElem(r.Path); err != nil {
			return nil, fmt.Errorf("%s: line %d: path: %w", name, i+1, err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// checkPathElem refuses what is not one plain path element (an empty name,
// a separator, "." or ".."), so that a row cannot name a file outside its
// folder.
func checkPathElem(s string) error {
	switch {
	case s == "":
		return errors.New("empty")
	case s == "." || s == ".." || strings.ContainsAny(s, `/\`) || strings.ContainsRune(s, 0):
		return fmt.Errorf("%s is not a file name", excerpt.Quote(s))
	}
	return nil
}

// decodeUTF16 decodes UTF-16 text with an optional byte-order mark
// (little-endian without one).
func decodeUTF16(data []byte) (string, error) {
	if len(data)%2 != 0 {
		return "", fmt.Errorf("not UTF-16: odd length %d bytes", len(data))
	}
	var order binary.ByteOrder = binary.LittleEndian
	switch {
	case bytes.HasPrefix(data, []byte{0xFF, 0xFE}):
		data = data[2:]
	case bytes.HasPrefix(data, []byte{0xFE, 0xFF}):
		order, data = binary.BigEndian, data[2:]
	}
	u := make([]uint16, len(data)/2)
	for i := range u {
		u[i] = order.Uint16(data[2*i:])
	}
	for i := 0; i < len(u); i++ {
		switch {
		case utf16.IsSurrogate(rune(u[i])) && u[i] < 0xDC00 && i+1 < len(u) && u[i+1] >= 0xDC00 && u[i+1] < 0xE000:
			i++
		case utf16.IsSurrogate(rune(u[i])):
			return "", fmt.Errorf("not UTF-16: unpaired surrogate 0x%04X at byte %d", u[i], 2*i)
		}
	}
	return string(utf16.Decode(u)), nil
}

// EncodeCSV writes rows in the release's format: UTF-16LE with a byte-order
// mark, tab-separated, the header, the row index first, "\n" line ends.
// Every field must be valid UTF-8 free of tabs and line ends, and ClientID
// and Path plain file names; an error names the row, counted from 0.
func EncodeCSV(rows []Row) ([]byte, error) {
	var b strings.Builder
	b.WriteString(strings.Join(header, "\t"))
	b.WriteByte('\n')
	for i, r := range rows {
		f := []string{fmt.Sprint(i), r.ClientID, r.Path, r.Sentence, r.Age, r.Gender}
		for _, s := range f {
			if strings.ContainsAny(s, "\t\r\n") || !utf8.ValidString(s) {
				return nil, fmt.Errorf("lid: row %d: field %s has a tab, a line end or invalid UTF-8", i, excerpt.Quote(s))
			}
		}
		if err := checkPathElem(r.ClientID); err != nil {
			return nil, fmt.Errorf("lid: row %d: client_id: %w", i, err)
		}
		if err := checkPathElem(r.Path); err != nil {
			return nil, fmt.Errorf("lid: row %d: path: %w", i, err)
		}
		b.WriteString(strings.Join(f, "\t"))
		b.WriteByte('\n')
	}
	u := utf16.Encode([]rune(b.String()))
	out := make([]byte, 2+2*len(u))
	out[0], out[1] = 0xFF, 0xFE
	for i, c := range u {
		binary.LittleEndian.PutUint16(out[2+2*i:], c)
	}
	return out, nil
}

// CSVPath returns root/<language>/<split>.csv.
func CSVPath(root, language, split string) string {
	return filepath.Join(root, language, split+".csv")
}

// AudioPath returns the file a row of <language>/<split>.csv names:
// root/<language>/<split>/<client_id>/<path>.
func AudioPath(root, language, split string, r Row) string {
	return filepath.Join(root, language, split, r.ClientID, r.Path)
}

// Load reads one split of a corpus in the CommonLanguage layout, train, dev
// or test: every folder of root holding <split>.csv, in sorted order as the
// HF script's sorted glob, and every row of it. A folder must be named
// after one of the 45 languages. A language without the CSV is absent from
// the split, as in the synthetic stand-in, which has fewer languages.
//
// Errors name the file and line: an unknown language folder, a malformed
// CSV as [ParseCSV] finds it, an audio file that is missing or not a
// regular file, no language folder at all.
func Load(root, split string) ([]Utterance, error) {
	if err := checkSplit(split); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("lid: corpus %s: %w", root, err)
	}
	var out []Utterance
	found := 0
	for _, e := range entries { // os.ReadDir sorts by name
		if !e.IsDir() {
			continue
		}
		csvPath := CSVPath(root, e.Name(), split)
		data, err := os.ReadFile(csvPath)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("lid: %w", err)
		}
		label, ok := LanguageIndex(e.Name())
		if !ok {
			return nil, fmt.Errorf("lid: %s: folder %s is not a CommonLanguage language", csvPath, excerpt.Quote(e.Name()))
		}
		rows, err := ParseCSV(data, csvPath)
		if err != nil {
			return nil, fmt.Errorf("lid: %w", err)
		}
		found++
		for i, r := range rows {
			p := AudioPath(root, e.Name(), split, r)
			st, err := os.Stat(p)
			if err != nil {
				return nil, fmt.Errorf("lid: %s: line %d: audio: %w", csvPath, i+2, err)
			}
			if !st.Mode().IsRegular() {
				return nil, fmt.Errorf("lid: %s: line %d: audio %s is not a regular file", csvPath, i+2, p)
			}
			out = append(out, Utterance{Path: p, Language: label, Row: r})
		}
	}
	if found == 0 {
		return nil, fmt.Errorf("lid: corpus %s: no language folder holds %s.csv (the root is the folder holding %s/, %s/, ...: the release's common_voice_kpd)",
			root, split, languages[0], languages[1])
	}
	return out, nil
}

// Present returns the sorted labels that occur in utts.
func Present(utts []Utterance) []int {
	seen := map[int]bool{}
	for _, u := range utts {
		seen[u.Language] = true
	}
	out := make([]int, 0, len(seen))
	for l := range seen {
		out = append(out, l)
	}
	sort.Ints(out)
	return out
}

package lid

import (
	"fmt"
	"io"
	"strings"
)

// A stand-in language: a CommonLanguage label, the espeak-ng voice that
// speaks it and the Debian word list its sentences are built from.
type standIn struct {
	Voice string     // espeak-ng voice (espeak-ng --voices)
	Words WordSource // the words of its sentences
}

func hunspellDic(pkg, file string) WordSource {
	return WordSource{Package: pkg, Kind: Hunspell, Paths: []string{"/usr/share/hunspell/" + file}}
}

func isoCodes(locale string, catalogues ...string) WordSource {
	s := WordSource{Package: "iso-codes", Kind: ISOCodes}
	for _, c := range catalogues {
		s.Paths = append(s.Paths, "/usr/share/locale/"+locale+"/LC_MESSAGES/"+c+".mo")
	}
	return s
}

// standIns are the CommonLanguage languages the synthetic corpus renders
// (docs/speech.md, "Data": the language/voice table). Word lists: hunspell
// or myspell dictionaries where Debian has one, else aspell's (Welsh,
// Tamil), else the language's iso-codes translations of country, language
// and script names (Cantonese, Chuvash, Georgian, Interlingua, Japanese,
// Kyrgyz, Maltese, Tatar: Debian has no dictionary for them).
var standIns = map[string]standIn{
	"Arabic":           {"ar", hunspellDic("hunspell-ar", "ar.dic")},
	"Basque":           {"eu", hunspellDic("hunspell-eu", "eu.dic")},
	"Catalan":          {"ca", hunspellDic("hunspell-ca", "ca.dic")},
	"Chinese_Hongkong": {"yue", isoCodes("zh_HK", "iso_3166-1", "iso_639-2")},
	"Chuvash":          {"cv", isoCodes("cv", "iso_3166-1", "iso_15924")},
	"Czech":            {"cs", hunspellDic("hunspell-cs", "cs_CZ.dic")},
	"Dutch":            {"nl", hunspellDic("hunspell-nl", "nl.dic")},
	"English":          {"en-us", hunspellDic("hunspell-en-us", "en_US.dic")},
	"Esperanto":        {"eo", hunspellDic("myspell-eo", "eo.dic")},
	"Estonian":         {"et", hunspellDic("myspell-et", "et_EE.dic")},
	"French":           {"fr-fr", hunspellDic("hunspell-fr-classical", "fr.dic")},
	"Georgian":         {"ka", isoCodes("ka", "iso_3166-1", "iso_639-3")},
	"German":           {"de", hunspellDic("hunspell-de-de", "de_DE.dic")},
	"Greek":            {"el", hunspellDic("hunspell-el", "el_GR.dic")},
	"Indonesian":       {"id", hunspellDic("hunspell-id", "id_ID.dic")},
	"Interlingua":      {"ia", isoCodes("ia", "iso_3166-1", "iso_15924")},
	"Italian":          {"it", hunspellDic("hunspell-it", "it_IT.dic")},
	"Japanese":         {"ja", isoCodes("ja", "iso_3166-1", "iso_639-3")},
	"Kyrgyz":           {"ky", isoCodes("ky", "iso_3166-1", "iso_3166-2")},
	"Latvian":          {"lv", hunspellDic("hunspell-lv", "lv_LV.dic")},
	"Maltese":          {"mt", isoCodes("mt", "iso_3166-1", "iso_639-3")},
	"Persian":          {"fa", hunspellDic("myspell-fa", "fa_IR.dic")},
	"Polish":           {"pl", hunspellDic("hunspell-pl", "pl_PL.dic")},
	"Portuguese":       {"pt", hunspellDic("hunspell-pt-pt", "pt_PT.dic")},
	"Romanian":         {"ro", hunspellDic("hunspell-ro", "ro_RO.dic")},
	"Russian":          {"ru", hunspellDic("hunspell-ru", "ru_RU.dic")},
	"Slovenian":        {"sl", hunspellDic("hunspell-sl", "sl_SI.dic")},
	"Spanish":          {"es", hunspellDic("hunspell-es", "es_ES.dic")},
	"Swedish":          {"sv", hunspellDic("hunspell-sv", "sv_SE.dic")},
	"Tamil":            {"ta", WordSource{Package: "aspell-ta", Kind: Aspell, Paths: []string{"ta"}}},
	"Tatar":            {"tt", isoCodes("tt", "iso_3166-1", "iso_639-3")},
	"Turkish":          {"tr", hunspellDic("hunspell-tr", "tr_TR.dic")},
	"Ukranian":         {"uk", hunspellDic("hunspell-uk", "uk_UA.dic")},
	"Welsh":            {"cy", WordSource{Package: "aspell-cy", Kind: Aspell, Paths: []string{"cy"}}},
}

// notRendered says why the other ten CommonLanguage languages are not in
// the synthetic corpus.
var notRendered = map[string]string{
	"Breton":            "espeak-ng has no Breton voice",
	"Chinese_China":     "espeak-ng's Mandarin voice (cmn, Debian's espeak-ng-data) reads 1 in 200 of the iso-codes zh_CN words without switching to English (\"Chinese letter\")",
	"Chinese_Taiwan":    "espeak-ng has no Taiwanese Mandarin voice (and its cmn reads almost no Hanzi: Chinese_China)",
	"Dhivehi":           "espeak-ng has no Dhivehi voice",
	"Frisian":           "espeak-ng has no Frisian voice",
	"Hakha_Chin":        "espeak-ng has no Hakha Chin voice",
	"Kabyle":            "espeak-ng has no Kabyle voice",
	"Kinyarwanda":       "espeak-ng has no Kinyarwanda voice",
	"Mangolian":         "espeak-ng has no Mongolian voice",
	"Romansh_Sursilvan": "espeak-ng has no Romansh voice",
	"Sakha":             "espeak-ng has no Sakha voice",
}

// Voice variants of espeak-ng (espeak-ng-data/voices/!v) the corpus
// combines with each language's voice; a voice is language + variant.
var (
	maleVariants   = []string{"m1", "m2", "m3", "m4", "m5", "m6", "m7"}
	femaleVariants = []string{"f1", "f2", "f3", "f4", "f5"}
)

// standInLanguages returns the names of the CommonLanguage languages the
// synthetic corpus can render, in label order.
func standInLanguages() []string {
	var out []string
	for _, l := range languages {
		if _, ok := standIns[l]; ok {
			out = append(out, l)
		}
	}
	return out
}

// standInVoice returns the espeak-ng voice and the word source of a stand-in
// language; ok is false for a language the corpus does not render, with the
// reason in why.
func standInVoice(language string) (voice string, words WordSource, why string, ok bool) {
	if s, ok := standIns[language]; ok {
		return s.Voice, s.Words, "", true
	}
	if r, ok := notRendered[language]; ok {
		return "", WordSource{}, r, false
	}
	return "", WordSource{}, "not a CommonLanguage language", false
}

// WriteStandIns writes the table of `nvdp lidcorpus --list` to w: a line per
// CommonLanguage label, tab-separated, with its voice and its word list's
// package, kind and paths, or "-" and why the stand-in lacks it.
func WriteStandIns(w io.Writer) error {
	var b strings.Builder
	for i, l := range Languages() {
		voice, src, why, ok := standInVoice(l)
		if !ok {
			fmt.Fprintf(&b, "%d\t%s\t-\t%s\n", i, l, why)
			continue
		}
		fmt.Fprintf(&b, "%d\t%s\t%s\t%s %s %s\n", i, l, voice, src.Package, src.Kind, strings.Join(src.Paths, " "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

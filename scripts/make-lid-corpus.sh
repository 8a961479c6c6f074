#!/usr/bin/env bash
# make-lid-corpus.sh renders the synthetic stand-in of CommonLanguage
# (docs/speech.md, "Data"). It is NOT CommonLanguage: the corpus's README.md
# and SYNTHETIC.json say so.
#
#   scripts/make-lid-corpus.sh OUT_DIR [nvdp lidcorpus flags...]
#   scripts/make-lid-corpus.sh /tmp/lid-small --train 5 --dev 5 --test 5
#
# Installs espeak-ng and the word lists (Debian packages; as root, or with
# sudo) when missing, builds cmd/nvdp and runs `nvdp lidcorpus --out OUT_DIR`.
set -euo pipefail

if [[ $# -lt 1 || $1 == -* ]]; then
	echo "usage: $0 OUT_DIR [nvdp lidcorpus flags...]" >&2
	exit 2
fi
out=$1
shift
cd "$(dirname "$0")/.."

# The renderer and every word list of lid's language table (lid/voices.go;
# `nvdp lidcorpus --list` prints it).
packages=(
	espeak-ng aspell iso-codes
	hunspell-ar hunspell-ca hunspell-cs hunspell-de-de hunspell-el hunspell-en-us hunspell-es
	hunspell-eu hunspell-fr-classical hunspell-id hunspell-it hunspell-lv hunspell-nl hunspell-pl
	hunspell-pt-pt hunspell-ro hunspell-ru hunspell-sl hunspell-sv hunspell-tr hunspell-uk
	myspell-eo myspell-et myspell-fa aspell-cy aspell-ta
)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
	sudo=()
	[[ $(id -u) -eq 0 ]] || sudo=(sudo)
	echo "installing ${missing[*]}" >&2
	"${sudo[@]}" apt-get update -qq
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/nvdp" ./cmd/nvdp
"$bin/nvdp" lidcorpus --out "$out" "$@"

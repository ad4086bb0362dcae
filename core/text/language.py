"""Which language to write in: detected from the topic, or named by the user (`--language`).

    detect_language("Wie funktioniert die Garbage Collection in Python")  -> "de"
    resolve_language("简体中文", "any topic")                              -> "zh"
    resolve_language(None, "Python 的 asyncio 和 threading 有什么区别")    -> "zh"

Detection is a deterministic heuristic for short topics (a few words), with no network, model or
dependency: the script decides first (Han, kana, Hangul, Cyrillic, Arabic, Hebrew, Greek,
Devanagari, Thai), and Latin-script text is scored on small lists of function words and
diacritics. It knows only the languages in `LANGUAGES`, takes a Han-only topic for Chinese even
when it is Japanese kanji, cannot read intent ("Die Hard sequels" looks German), and never
guesses: no evidence, or a tie, gives `default`. It does not translate or call a model.
"""

from __future__ import annotations

import re
import unicodedata

# code -> (English name, native names...); the names are what `--language` accepts.
LANGUAGES: dict[str, tuple[str, ...]] = {
    "en": ("English", "English"),
    "zh": ("Chinese", "中文", "汉语", "漢語", "简体中文", "繁體中文", "普通话", "Mandarin"),
    "ja": ("Japanese", "日本語", "にほんご"),
    "ko": ("Korean", "한국어", "조선말"),
    "ru": ("Russian", "русский", "русский язык"),
    "uk": ("Ukrainian", "українська", "українська мова"),
    "ar": ("Arabic", "العربية"),
    "he": ("Hebrew", "עברית"),
    "el": ("Greek", "Ελληνικά"),
    "hi": ("Hindi", "हिन्दी", "हिंदी"),
    "th": ("Thai", "ไทย", "ภาษาไทย"),
    "fr": ("French", "français"),
    "de": ("German", "Deutsch"),
    "es": ("Spanish", "español", "castellano"),
    "pt": ("Portuguese", "português"),
    "it": ("Italian", "italiano"),
    "nl": ("Dutch", "Nederlands"),
    "pl": ("Polish", "polski"),
    "sv": ("Swedish", "svenska"),
    "tr": ("Turkish", "Türkçe"),
    "vi": ("Vietnamese", "Tiếng Việt"),
    "id": ("Indonesian", "Bahasa Indonesia", "Indonesia"),
}

_CJK = frozenset({"zh", "ja", "ko"})

# Function words, plus a few words topics ask with ("difference", "works"). Single letters that
# English topics contain ("I/O", "C or C++") are left out on purpose: "i" and "o" are not evidence.
_WORDS: dict[str, str] = {
    "en": "the of and to is are what how why which when does do should can with for between or "
          "from than versus vs my difference best use it this that an",
    "fr": "le la les des du un une est et en que qui comment pourquoi quelle quel quels quelles "
          "entre pour dans sur avec au aux ce cette pas sont fonctionne différence l d qu de",
    "de": "der die das und ist wie was warum welche ein eine einen nicht mit für von zu auf den "
          "dem des im zwischen unterschied funktioniert sind bei oder auch sich",
    "es": "el la los las de del y es en que qué cómo cuál cuáles por para con una un entre "
          "funciona diferencia son lo se al sobre mejor hay está",
    "pt": "os as de do da dos das e é em um uma que qual quais como para por com não são entre no "
          "na diferença funciona porque mais ao está",
    "it": "il lo la gli le di del della dei che è e un una per con non come cosa quale quali tra "
          "fra perché funziona differenza sono nel nella dal su più",
    "nl": "het een van en is de dat wat hoe werkt zijn niet op voor met tussen verschil waarom "
          "welke te ook aan bij naar wordt kan of",
    "pl": "w jak jest się czy na do nie co to że dla z od po jaki jaka między różnica działa czym "
          "oraz które który przez ze",
    "sv": "och är att det som en på för med av hur vad inte till mellan skillnaden fungerar varför "
          "vilken kan om den ett jag eller",
    "tr": "ve bir bu için ile nasıl nedir ne mi mı da de daha arasındaki fark neden hangi olan "
          "gibi çok nasil",
    "vi": "của là và không có những các cho với được trong một này như thế nào gì sao khác nhau "
          "giữa hoạt động",
    "id": "yang dan di ini itu dengan untuk dari ke apa bagaimana adalah tidak pada dalam antara "
          "perbedaan cara kerja mengapa bisa akan atau",
}
_WORD_LANGS: dict[str, list[str]] = {}
for _code, _words in _WORDS.items():
    for _word in _words.split():
        _WORD_LANGS.setdefault(_word, []).append(_code)

# Letters that point at a few languages; é, á and friends are too widespread to help.
_CHARS: dict[str, tuple[str, ...]] = {
    "ß": ("de",), "ä": ("de", "sv"), "ö": ("de", "sv", "tr"), "ü": ("de", "tr"),
    "ç": ("fr", "pt", "tr"), "è": ("fr", "it"), "ê": ("fr", "pt", "vi"), "î": ("fr",),
    "û": ("fr",), "œ": ("fr",), "ë": ("fr", "nl"), "ï": ("fr", "nl"), "ù": ("fr", "it"),
    "ñ": ("es",), "¿": ("es",), "¡": ("es",), "ã": ("pt", "vi"), "õ": ("pt",),
    "ì": ("it", "vi"), "ò": ("it", "vi"), "å": ("sv",), "ı": ("tr",), "ğ": ("tr",), "ş": ("tr",),
    "İ": ("tr",), "đ": ("vi",), "ơ": ("vi",), "ư": ("vi",), "ă": ("vi",),
    **{c: ("pl",) for c in "ąęłśźżćń"},
}
_CHAR_WEIGHT = 0.5  # a letter is weaker evidence than a word: names carry them too

# (first, last) code point -> the language its script means; "cjk" (Han) becomes zh, or ja when
# kana are present; "ru" (Cyrillic) becomes uk on Ukrainian-only letters.
_SCRIPTS: tuple[tuple[int, int, str], ...] = (
    (0x3040, 0x30FF, "kana"), (0x31F0, 0x31FF, "kana"), (0xFF66, 0xFF9F, "kana"),
    (0x3400, 0x4DBF, "cjk"), (0x4E00, 0x9FFF, "cjk"), (0xF900, 0xFAFF, "cjk"),
    (0x20000, 0x2FA1F, "cjk"), (0xAC00, 0xD7AF, "ko"), (0x1100, 0x11FF, "ko"),
    (0x3130, 0x318F, "ko"), (0x0400, 0x052F, "ru"), (0x0370, 0x03FF, "el"), (0x1F00, 0x1FFF, "el"),
    (0x0590, 0x05FF, "he"), (0x0600, 0x06FF, "ar"), (0x0750, 0x077F, "ar"), (0xFB50, 0xFDFF, "ar"),
    (0xFE70, 0xFEFF, "ar"), (0x0900, 0x097F, "hi"), (0x0E00, 0x0E7F, "th"),
)
_UKRAINIAN = frozenset("іїєґІЇЄҐ")
# A script wins over Latin with this many letters or this share: "Python 的 asyncio 和 threading
# 有什么区别" is Chinese, "Compute π in Python" is not Greek.
_MIN_LETTERS, _MIN_SHARE = 2, 0.15


def _script(ch: str) -> str | None:
    cp = ord(ch)
    for first, last, script in _SCRIPTS:
        if first <= cp <= last:
            return script
    return None


def _by_script(text: str) -> str | None:
    """The language a non-Latin script decides, or None when the text is (mostly) Latin."""
    counts: dict[str, int] = {}
    letters = 0
    for ch in text:
        if ch.isalpha():
            letters += 1
            script = _script(ch)
            if script:
                counts[script] = counts.get(script, 0) + 1
    kana = counts.pop("kana", 0)
    if kana:  # Japanese mixes kana with Han; Chinese never has kana
        counts["ja"] = kana + counts.pop("cjk", 0)
    if not counts:
        return None
    script, n = max(counts.items(), key=lambda item: item[1])
    if n < _MIN_LETTERS and n / letters < _MIN_SHARE:
        return None
    if script == "cjk":
        return "zh"
    if script == "ru" and any(ch in _UKRAINIAN for ch in text):
        return "uk"
    return script


def _by_words(text: str, default: str) -> str:
    scores: dict[str, float] = {}
    # A word or letter shared by n languages gives each 1/n: "de" hardly helps, "wie" does.
    for word in re.findall(r"[^\W\d_]+", text.lower()):
        langs = _WORD_LANGS.get(word, ())
        for lang in langs:
            scores[lang] = scores.get(lang, 0.0) + 1 / len(langs)
    for ch in text:
        langs = _CHARS.get(ch) or _CHARS.get(ch.lower()) or ()
        if "\u1ea0" <= ch <= "\u1ef9":  # Latin Extended Additional: Vietnamese tone marks
            langs = ("vi",)
        for lang in langs:
            scores[lang] = scores.get(lang, 0.0) + _CHAR_WEIGHT / len(langs)
    ranked = sorted(scores.values(), reverse=True)
    if not ranked or (len(ranked) > 1 and ranked[0] - ranked[1] < 1e-9):
        return default
    return max(scores, key=scores.__getitem__)


def detect_language(text: str, default: str = "en") -> str:
    """ISO 639-1 code of the language `text` is written in (topics are short: a few words)."""
    return _by_script(text) or _by_words(text, default)


def language_name(code: str) -> str:
    """English name of a code: 'zh' -> 'Chinese', 'en' -> 'English'; unknown codes -> the code
    itself."""
    names = LANGUAGES.get(_primary(code))
    return names[0] if names else code


def is_cjk(code: str) -> bool:
    """True for Chinese, Japanese and Korean, which need no spaces between words."""
    return _primary(code) in _CJK


def _primary(code: str) -> str:
    # "zh-CN" and "pt_BR" are still Chinese and Portuguese.
    return re.split(r"[-_]", code.strip().lower(), maxsplit=1)[0]


def _fold(name: str) -> str:
    # "Français", "francais" and "FRANÇAIS" are the same answer to the same question.
    decomposed = unicodedata.normalize("NFKD", " ".join(name.casefold().split()))
    kept = "".join(c for c in decomposed if not unicodedata.combining(c))
    return unicodedata.normalize("NFC", kept)


_BY_NAME: dict[str, str] = {_fold(name): code
                             for code, names in LANGUAGES.items() for name in names}
_TAG = re.compile(r"^([a-z]{2})(?:[-_][a-z0-9]{2,8})*$")


def resolve_language(option: str | None, text: str) -> str:
    """The code to write in: `option` when given (a code like 'zh', 'zh-CN', 'pt-BR', an English
    name like 'Chinese' or 'chinese', or a native name like '中文', 'Deutsch', 'français', '日本語'),
    else detected from `text`; a blank `option` counts as not given.

    Raises ValueError with a message listing the accepted forms when `option` is not recognised."""
    if option is None or not option.strip():
        return detect_language(text)
    tag = _TAG.match(option.strip().lower())
    if tag and tag.group(1) in LANGUAGES:
        return tag.group(1)
    code = _BY_NAME.get(_fold(option))
    if code:
        return code
    # One line: it is shown to the user as is (CLI, a CSV row's error).
    raise ValueError(
        f"unknown language {option!r}: give an ISO 639-1 code ('zh', 'zh-CN', 'pt-BR') or a "
        f"name ('Chinese', '中文', 'Deutsch'); known codes: {', '.join(LANGUAGES)}")

"""The language of a topic (core/text/language.py): detected from its text, or named with
--language."""

from __future__ import annotations

import pytest

from core.text.language import LANGUAGES, detect_language, is_cjk, language_name, resolve_language


@pytest.mark.parametrize("text, code", [
    # The examples.
    ("Wie funktioniert die Garbage Collection in Python", "de"),
    ("Comment fonctionne le ramasse-miettes de Python", "fr"),
    ("¿Cuál es la diferencia entre hilos y asyncio?", "es"),
    ("Qual é a diferença entre threads e asyncio em Python", "pt"),
    ("Come funziona il garbage collector di Python", "it"),
    ("Как работает сборщик мусора в Python", "ru"),
    ("Pythonのガベージコレクションの仕組み", "ja"),
    ("파이썬 가비지 컬렉션은 어떻게 동작합니까", "ko"),
    ("线程和异步IO在等待网络时有什么区别", "zh"),
    ("Python 的 asyncio 和 threading 有什么区别", "zh"),
    # Short English topics, with product names and "I/O" that must not look Italian or Spanish.
    ("Threading vs asyncio for I/O", "en"),
    ("Should I use Postgres or SQLite", "en"),
    ("asyncio event loop", "en"),
    ("What is the difference between a list and a tuple", "en"),
    ("How do I profile memory in Python", "en"),
    ("Compute π in Python", "en"),
    ("Why is the Müller-Lyer illusion so strong", "en"),
    # The other Latin-script languages.
    ("Hoe werkt de garbage collector van Python", "nl"),
    ("Jak działa odśmiecanie pamięci w Pythonie", "pl"),
    ("Hur fungerar skräpsamlingen i Python", "sv"),
    ("Python'da çöp toplama nasıl çalışır", "tr"),
    ("Bộ thu gom rác trong Python hoạt động như thế nào", "vi"),
    ("Bagaimana cara kerja garbage collector di Python", "id"),
    # The other scripts, including Cyrillic mixed with Latin product names.
    ("Як працює збирач сміття в Python", "uk"),
    ("Разница между asyncio и threading в Python", "ru"),
    ("كيف يعمل جامع القمامة في بايثون", "ar"),
    ("איך עובד איסוף זבל בפייתון", "he"),
    ("Πώς λειτουργεί η συλλογή απορριμμάτων στην Python", "el"),
    ("पायथन में गार्बेज कलेक्शन कैसे काम करता है", "hi"),
    ("การเก็บขยะใน Python ทำงานอย่างไร", "th"),
    ("東京の天気", "ja"),  # Han with kana is Japanese, not Chinese
    ("猫", "zh"),
])
def test_detects_the_language_of_a_topic(text: str, code: str) -> None:
    assert detect_language(text) == code


@pytest.mark.parametrize("text", ["", "   ", "123 !!! ?", "asyncio", "de facto"])
def test_no_evidence_or_a_tie_gives_the_default(text: str) -> None:
    assert detect_language(text, default="fr") == "fr"
    assert detect_language(text, default="ja") == "ja"


def test_default_is_english() -> None:
    assert detect_language("") == "en"
    assert detect_language("asyncio event loop", default="de") == "de"


def test_evidence_beats_the_default() -> None:
    assert detect_language("Wie funktioniert die Garbage Collection", default="fr") == "de"
    assert detect_language("Python 的 asyncio 和 threading 有什么区别", default="en") == "zh"


def test_detection_is_deterministic() -> None:
    text = "Come funziona il garbage collector di Python"
    assert {detect_language(text) for _ in range(20)} == {"it"}


@pytest.mark.parametrize("option, code", [
    # codes, with regions and scripts, in any case and with either separator
    ("de", "de"), ("DE", "de"), ("de-DE", "de"), ("de_AT", "de"), ("zh", "zh"), ("zh-CN", "zh"),
    ("zh-Hans", "zh"), ("zh-TW", "zh"), ("zh-Hant-TW", "zh"), ("pt-BR", "pt"), ("en-GB", "en"),
    (" ja ", "ja"),
    # English names
    ("German", "de"), ("german", "de"), ("GERMAN", "de"), ("Chinese", "zh"), ("chinese", "zh"),
    ("Mandarin", "zh"), ("Japanese", "ja"), ("Portuguese", "pt"), ("Dutch", "nl"),
    # native names, with or without their accents
    ("Deutsch", "de"), ("deutsch", "de"), ("français", "fr"), ("Français", "fr"),
    ("francais", "fr"), ("español", "es"), ("espanol", "es"), ("português", "pt"),
    ("Türkçe", "tr"), ("Tiếng Việt", "vi"), ("tieng viet", "vi"), ("Bahasa Indonesia", "id"),
    ("中文", "zh"), ("简体中文", "zh"), ("汉语", "zh"), ("繁體中文", "zh"), ("日本語", "ja"),
    ("한국어", "ko"), ("русский", "ru"), ("Русский", "ru"), ("українська", "uk"),
    ("العربية", "ar"), ("עברית", "he"), ("Ελληνικά", "el"), ("हिन्दी", "hi"), ("ไทย", "th"),
])
def test_resolve_accepts_codes_and_names(option: str, code: str) -> None:
    assert resolve_language(option, "Threading vs asyncio for I/O") == code


def test_resolve_accepts_every_name_in_the_table() -> None:
    for code, names in LANGUAGES.items():
        assert resolve_language(code, "") == code
        assert resolve_language(code.upper() + "-XX", "") == code
        for name in names:
            assert resolve_language(name, "") == code, name
            assert resolve_language(name.upper(), "") == code, name


def test_the_table_has_the_languages_detection_can_return() -> None:
    expected = {"en", "zh", "ja", "ko", "ru", "uk", "ar", "he", "el", "hi", "th",
                "fr", "de", "es", "pt", "it", "nl", "pl", "sv", "tr", "vi", "id"}
    assert expected <= set(LANGUAGES)


def test_the_option_wins_over_the_topic() -> None:
    assert resolve_language("en", "Python 的 asyncio 和 threading 有什么区别") == "en"
    assert resolve_language("Deutsch", "Comment fonctionne le ramasse-miettes de Python") == "de"


@pytest.mark.parametrize("option", [None, "", "   "])
def test_without_an_option_the_topic_decides(option: str | None) -> None:
    assert resolve_language(option, "Python 的 asyncio 和 threading 有什么区别") == "zh"
    assert resolve_language(option, "Comment fonctionne le ramasse-miettes de Python") == "fr"
    assert resolve_language(option, "asyncio event loop") == "en"


@pytest.mark.parametrize("option", ["klingon", "Klingon", "xx", "xx-YY", "zh-", "english!", "e"])
def test_an_unknown_language_is_a_clear_error(option: str) -> None:
    with pytest.raises(ValueError) as err:
        resolve_language(option, "Threading vs asyncio for I/O")
    message = str(err.value)
    assert repr(option) in message
    # it says which forms are accepted and lists what is known
    for hint in ("ISO 639-1", "pt-BR", "Chinese", "中文", "Deutsch", "known codes: en, zh, ja"):
        assert hint in message


def test_language_name() -> None:
    assert language_name("zh") == "Chinese"
    assert language_name("en") == "English"
    assert language_name("de") == "German"
    assert language_name("pt-BR") == "Portuguese"
    assert language_name("tlh") == "tlh"
    assert language_name("xx-YY") == "xx-YY"
    for code in LANGUAGES:
        assert language_name(code) != code


def test_is_cjk() -> None:
    assert is_cjk("zh") and is_cjk("ja") and is_cjk("ko")
    assert is_cjk("zh-TW") and is_cjk("ZH")
    assert not any(is_cjk(code) for code in LANGUAGES if code not in {"zh", "ja", "ko"})
    assert not is_cjk("zhx")

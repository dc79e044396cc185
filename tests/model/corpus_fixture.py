"""Small corpora for the data report and filter tests, built here rather than read from disk.

`lexicon_pairs` makes English-French pairs from a small bilingual lexicon and four sentence patterns: real words
of both languages in translation of each other (if not always grammatical French: no agreement), so that a word's
translation is what co-occurs with it, as in a real corpus, and a target moved to another row no longer fits its
source. GERMAN holds real German sentences to put in the place of French targets.
"""

from __future__ import annotations

import random

NOUNS = [
    ("cat", "chat"),
    ("dog", "chien"),
    ("house", "maison"),
    ("car", "voiture"),
    ("book", "livre"),
    ("tree", "arbre"),
    ("window", "fenêtre"),
    ("door", "porte"),
    ("garden", "jardin"),
    ("river", "rivière"),
    ("city", "ville"),
    ("child", "enfant"),
    ("teacher", "professeur"),
    ("bird", "oiseau"),
    ("horse", "cheval"),
    ("letter", "lettre"),
    ("bridge", "pont"),
    ("mountain", "montagne"),
    ("street", "rue"),
    ("flower", "fleur"),
    ("train", "wagon"),
    ("boat", "bateau"),
    ("village", "bourg"),
    ("school", "école"),
    ("kitchen", "cuisine"),
    ("apple", "pomme"),
    ("bread", "pain"),
    ("cheese", "fromage"),
    ("friend", "ami"),
    ("neighbour", "voisin"),
]
ADJECTIVES = [
    ("red", "rouge"),
    ("big", "grand"),
    ("small", "petit"),
    ("old", "vieux"),
    ("new", "nouveau"),
    ("green", "vert"),
    ("black", "noir"),
    ("white", "blanc"),
    ("beautiful", "joli"),
    ("quiet", "calme"),
    ("happy", "heureux"),
    ("strange", "étrange"),
    ("cold", "froid"),
    ("warm", "chaud"),
    ("empty", "vide"),
]
VERBS = [
    ("sees", "voit"),
    ("likes", "aime"),
    ("finds", "trouve"),
    ("opens", "ouvre"),
    ("closes", "ferme"),
    ("watches", "regarde"),
    ("follows", "suit"),
    ("paints", "peint"),
    ("sells", "vend"),
    ("buys", "achète"),
    ("draws", "dessine"),
    ("forgets", "oublie"),
]
PATTERNS = [
    ("the {a1} {n1} {v} the {n2}", "le {n1} {a1} {v} le {n2}"),
    ("my {n1} {v} your {a1} {n2} every morning", "mon {n1} {v} ton {n2} {a1} chaque matin"),
    ("yesterday the {n1} was very {a1}", "hier le {n1} était très {a1}"),
    ("where is the {a1} {n1} of the {n2}?", "où est le {n1} {a1} du {n2} ?"),
]

GERMAN = [
    "Der Zug nach Berlin hat heute zwanzig Minuten Verspätung.",
    "Ich habe das Buch gestern Abend in der Bibliothek gefunden.",
    "Kannst du mir bitte sagen, wo der nächste Bahnhof ist?",
    "Die Kinder spielen im Garten, während die Eltern kochen.",
    "Wir müssen die Datei speichern, bevor das Programm beendet wird.",
    "Das Wetter ist heute viel schöner als gestern.",
    "Meine Schwester wohnt seit drei Jahren in einer kleinen Stadt.",
    "Bitte schließen Sie das Fenster, es wird kalt.",
    "Der Drucker ist nicht verbunden oder ausgeschaltet.",
    "Nach dem Essen gehen wir gemeinsam spazieren.",
    "Die Verbindung zum Server wurde unerwartet getrennt.",
    "Er liest jeden Morgen die Zeitung beim Frühstück.",
    "Unsere Nachbarn haben einen großen Hund und zwei Katzen.",
    "Das Passwort muss mindestens acht Zeichen lang sein.",
    "Im Sommer fahren wir oft an die Ostsee.",
    "Ich verstehe nicht, warum diese Einstellung ignoriert wird.",
    "Die Brücke über den Fluss wurde letztes Jahr erneuert.",
    "Möchten Sie die Änderungen vor dem Schließen speichern?",
    "Der Lehrer erklärt die Aufgabe noch einmal langsam.",
    "Auf dem Markt kaufen wir frisches Gemüse und Brot.",
    "Diese Funktion ist in der aktuellen Version nicht verfügbar.",
    "Am Wochenende besuchen wir unsere Großeltern auf dem Land.",
    "Das Museum ist montags geschlossen, aber dienstags geöffnet.",
    "Sie hat ihren Schlüssel schon wieder im Büro vergessen.",
    "Der Ordner enthält keine Dateien, die geöffnet werden können.",
    "Wir warten seit einer Stunde auf den Bus.",
    "Die Sonne scheint, und die Vögel singen in den Bäumen.",
    "Bitte geben Sie Ihren Benutzernamen und Ihr Passwort ein.",
    "Mein Bruder arbeitet als Ingenieur in einer großen Firma.",
    "Der Kuchen schmeckt wirklich ausgezeichnet, danke schön.",
    "Es ist ein Fehler beim Lesen der Konfigurationsdatei aufgetreten.",
    "Die Straße ist wegen Bauarbeiten bis Freitag gesperrt.",
    "Wir haben im Urlaub viele interessante Menschen kennengelernt.",
    "Das Herunterladen der Aktualisierungen ist fehlgeschlagen.",
    "Ich trinke morgens lieber Tee als Kaffee.",
    "Der Hund schläft den ganzen Nachmittag vor dem Ofen.",
    "Können wir das Treffen auf nächste Woche verschieben?",
    "Die Bibliothek bleibt während der Ferien geschlossen.",
    "Unser Garten ist im Frühling voller bunter Blumen.",
    "Die Anwendung muss neu gestartet werden, um fortzufahren.",
]


def lexicon_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """`n` distinct English-French pairs drawn from the lexicon and patterns (deterministic for a seed)."""
    rng = random.Random(seed)
    out: dict[tuple[str, str], None] = {}
    while len(out) < n:
        source, target = rng.choice(PATTERNS)
        (n1e, n1f), (n2e, n2f) = rng.sample(NOUNS, 2)
        a1e, a1f = rng.choice(ADJECTIVES)
        ve, vf = rng.choice(VERBS)
        pair = (
            source.format(n1=n1e, n2=n2e, a1=a1e, v=ve),
            target.format(n1=n1f, n2=n2f, a1=a1f, v=vf),
        )
        out[pair] = None
    return list(out)


def numbered(pairs: list[tuple[str, str]]) -> list[tuple[int, str, str]]:
    """(line, source, target) rows, lines from 1."""
    return [(i, source, target) for i, (source, target) in enumerate(pairs, start=1)]

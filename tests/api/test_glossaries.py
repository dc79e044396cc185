"""Glossaries over the API: created from entries or CSV (each entry once, spaces collapsed), listed and read by keys
with `read`, deleted by keys with `models:write`, another owner's a 404; each bad glossary a 422 naming the problem,
with nothing stored."""

from __future__ import annotations

import pytest

from app.schemas.glossaries import MAX_TERM_CHARS


def _body(**changes):
    return {
        "name": "ui terms",
        "source_language": "en",
        "target_language": "fr",
        "entries": [{"source": "file", "target": "fichier"}, {"source": "save  as", "target": "enregistrer sous"}],
        **changes,
    }


def _count(client, headers) -> int:
    return client.get("/v1/glossaries", headers=headers).json()["total"]


def test_a_glossary_is_created_read_listed_and_deleted(client, alice, make_key):
    created = client.post("/v1/glossaries", json=_body(), headers=alice)
    assert created.status_code == 201, created.text
    glossary = created.json()
    assert glossary["entries"] == [
        {"source": "file", "target": "fichier"},
        {"source": "save as", "target": "enregistrer sous"},  # spaces collapsed
    ]
    assert (glossary["terms"], glossary["case_sensitive"]) == (2, False)
    read = client.get(f"/v1/glossaries/{glossary['id']}", headers=alice).json()
    assert read == glossary
    listed = client.get("/v1/glossaries", headers=alice).json()
    assert listed["total"] == 1 and "entries" not in listed["data"][0] and listed["data"][0]["terms"] == 2
    bob = make_key("bob")
    assert client.get(f"/v1/glossaries/{glossary['id']}", headers=bob).status_code == 404
    assert client.delete(f"/v1/glossaries/{glossary['id']}", headers=bob).status_code == 404
    assert _count(client, bob) == 0
    assert client.delete(f"/v1/glossaries/{glossary['id']}", headers=alice).status_code == 204
    assert client.get(f"/v1/glossaries/{glossary['id']}", headers=alice).status_code == 404
    actions = [e["action"] for e in client.get("/v1/audit", headers=alice).json()["data"]]
    assert actions[:2] == ["glossary.deleted", "glossary.created"]


def test_a_csv_glossary_skips_its_header_and_blank_lines_and_keeps_each_entry_once(client, alice):
    text = 'source,target\nfile,fichier\n\n"save, as",enregistrer sous\nFile,fichier\n'
    created = client.post("/v1/glossaries", json=_body(entries=None, csv=text), headers=alice)
    assert created.status_code == 201, created.text
    assert [e["source"] for e in created.json()["entries"]] == ["file", "save, as"]  # File is file: not case-sensitive
    sensitive = client.post("/v1/glossaries", json=_body(entries=None, csv=text, case_sensitive=True), headers=alice)
    assert [e["source"] for e in sensitive.json()["entries"]] == ["file", "save, as", "File"]


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"entries": []}, "the glossary has no entry"),
        ({"entries": None, "csv": "source,target\n"}, "the glossary has no entry"),
        (
            {"entries": [{"source": "file", "target": "fichier"}, {"source": "FILE", "target": "dossier"}]},
            "conflicting entries for 'FILE': 'fichier' and 'dossier' (the glossary is not case-sensitive)",
        ),
        ({"entries": [{"source": "  ", "target": "x"}]}, "an entry has an empty source term"),
        ({"entries": [{"source": "a" * (MAX_TERM_CHARS + 1), "target": "x"}]}, "at most 200 characters"),
        ({"entries": None, "csv": "file,fichier,extra\n"}, "row 1 has 3 columns, not 2"),
        ({"csv": "file,fichier\n"}, "give the terms as `entries`, `csv` or `tbx`, one of the three"),
        ({"entries": None}, "give the terms as `entries`, `csv` or `tbx`, one of the three"),
        ({"source_language": "english"}, "must be a BCP 47 tag"),
    ],
)
def test_a_bad_glossary_is_a_422_naming_the_problem_and_nothing_is_stored(client, alice, changes, needle):
    response = client.post("/v1/glossaries", json=_body(**changes), headers=alice)
    assert response.status_code == 422 and needle in response.text, response.text
    assert _count(client, alice) == 0


def test_reading_needs_read_and_writing_models_write(client, make_key):
    from app.core.scopes import Scope
    from app.db.keys import create_key
    from app.db.session import session_scope

    def key(*scopes: Scope) -> dict[str, str]:
        with session_scope() as session:
            _row, clear = create_key(session, f"carol-{scopes[0].value}", "carol", scopes=[s.value for s in scopes])
        return {"Authorization": f"Bearer {clear}"}

    reader, writer = key(Scope.READ), key(Scope.MODELS_WRITE)
    refused = client.post("/v1/glossaries", json=_body(), headers=reader)
    assert refused.status_code == 403 and "models:write" in refused.text
    created = client.post("/v1/glossaries", json=_body(), headers=writer)
    assert created.status_code == 201
    assert client.get(f"/v1/glossaries/{created.json()['id']}", headers=writer).status_code == 403
    assert client.get(f"/v1/glossaries/{created.json()['id']}", headers=reader).status_code == 200


TBX = """<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE martif [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<martif type="TBX" xml:lang="en"><martifHeader><fileDesc><sourceDesc><p>ui</p></sourceDesc></fileDesc></martifHeader>
<text><body>
  <termEntry id="1">
    <langSet xml:lang="en"><tig><term>address bar</term></tig></langSet>
    <langSet xml:lang="de"><tig><term>Adressleiste</term></tig></langSet>
    <langSet xml:lang="fr"><tig><term>barre d'adresse</term></tig></langSet>
  </termEntry>
  <termEntry id="2">
    <langSet xml:lang="en-US"><ntig><termGrp><term>file</term></termGrp></ntig></langSet>
    <langSet xml:lang="fr-FR"><ntig><termGrp><term>fichier</term></termGrp></ntig></langSet>
  </termEntry>
  <termEntry id="3"><langSet xml:lang="en"><tig><term>only English</term></tig></langSet></termEntry>
  <termEntry id="4">
    <langSet xml:lang="en"><tig><term>&secret;root</term></tig></langSet>
    <langSet xml:lang="fr"><tig><term>racine</term></tig></langSet>
  </termEntry>
</body></text></martif>
"""


ENTITIES = "".join(f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(8))
BOMB = (
    f'<?xml version="1.0"?><!DOCTYPE martif [<!ENTITY a "aaaaaaaaaa">{ENTITIES}]><martif type="TBX"><text><body>'
    '<termEntry><langSet xml:lang="en"><tig><term>&i;</term></tig></langSet>'
    '<langSet xml:lang="fr"><tig><term>x</term></tig></langSet></termEntry></body></text></martif>'
)


def test_a_tbx_glossary_takes_each_entrys_terms_in_its_two_languages(client, alice):
    created = client.post("/v1/glossaries", json=_body(entries=None, tbx=TBX), headers=alice)
    assert created.status_code == 201, created.text
    assert created.json()["entries"] == [
        {"source": "address bar", "target": "barre d'adresse"},
        {"source": "file", "target": "fichier"},  # en-US and fr-FR are en and fr
        {"source": "root", "target": "racine"},  # the external entity is not read
    ]
    german = client.post("/v1/glossaries", json=_body(entries=None, tbx=TBX, target_language="de"), headers=alice)
    assert german.json()["entries"] == [{"source": "address bar", "target": "Adressleiste"}]


@pytest.mark.parametrize(
    ("tbx", "needle"),
    [
        ("<martif><text><body>", "not a TBX document"),
        ("<tmx version='1.4'><body/></tmx>", "not a TBX document"),
        (BOMB, "Maximum entity amplification factor exceeded"),  # a billion laughs: refused, not expanded
        (
            TBX.replace('xml:lang="fr"', 'xml:lang="es"').replace("fr-FR", "es"),
            "no term entry has terms in both en and fr (languages found: de, en, es)",
        ),
    ],
)
def test_a_bad_tbx_document_is_a_422_naming_the_problem(client, alice, tbx, needle):
    response = client.post("/v1/glossaries", json=_body(entries=None, tbx=tbx), headers=alice)
    assert response.status_code == 422 and needle in response.text, response.text
    assert _count(client, alice) == 0

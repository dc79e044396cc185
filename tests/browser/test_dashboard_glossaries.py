"""The dashboard's glossaries page in Chromium: a glossary pasted as CSV is created (a conflicting one refused,
naming the term), listed with its pair and term count, its terms shown on demand, and deleted."""

from __future__ import annotations


def test_the_glossaries_page_creates_lists_shows_and_deletes_a_glossary(page):
    p = page.page
    page.sign_in()
    p.locator("#nav").get_by_role("link", name="Glossaries").click()
    p.get_by_role("heading", name="Glossaries").wait_for()
    p.get_by_label("Name").fill("ui terms")  # the stack is shared: other tests' glossaries may be listed too
    p.get_by_label("To").fill("fr")
    csv = p.get_by_label("Terms (CSV: source,target a line)")
    csv.fill("source,target\nfile,fichier\nFile,dossier\n")
    p.get_by_role("button", name="Create glossary").click()
    refused = p.locator("#glossary-form-status .error")
    refused.wait_for()
    assert "conflicting entries for 'File': 'fichier' and 'dossier'" in refused.inner_text()

    csv.fill('source,target\nfile,fichier\n"save, as",enregistrer sous\n')
    p.get_by_role("button", name="Create glossary").click()
    row = p.locator("tr[data-glossary]", has_text="ui terms")
    row.wait_for()
    assert row.count() == 1
    assert "ui terms" in row.inner_text() and "en → fr" in row.inner_text() and "2 terms" in row.inner_text()
    row.locator("summary", has_text="2 terms").click()
    terms = row.locator(".glossary-terms table tr")
    terms.first.wait_for()
    assert terms.all_inner_texts() == ["file\t→\tfichier", "save, as\t→\tenregistrer sous"]
    page.screenshot("glossaries")

    p.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Delete").click()
    row.wait_for(state="detached")


def test_a_tbx_file_loaded_in_the_form_makes_a_glossary(page, tmp_path):
    tbx = tmp_path / "ui.tbx"
    tbx.write_text(
        '<?xml version="1.0"?><martif type="TBX" xml:lang="en"><text><body>'
        '<termEntry><langSet xml:lang="en"><tig><term>folder</term></tig></langSet>'
        '<langSet xml:lang="fr"><tig><term>dossier</term></tig></langSet></termEntry>'
        "</body></text></martif>",
        encoding="utf-8",
    )
    p = page.page
    page.sign_in()
    p.locator("#nav").get_by_role("link", name="Glossaries").click()
    p.get_by_label("Name").fill("tbx terms")
    p.get_by_label("To").fill("fr")
    p.locator("#glossary-file").set_input_files(str(tbx))
    p.wait_for_function("document.querySelector('#glossary-csv').value.includes('martif')")
    p.get_by_role("button", name="Create glossary").click()
    row = p.locator("tr[data-glossary]", has_text="tbx terms")
    row.wait_for()
    assert "1 term" in row.inner_text() and "en → fr" in row.inner_text()
    row.locator("summary").click()
    terms = row.locator(".glossary-terms table tr")
    terms.first.wait_for()
    assert terms.all_inner_texts() == ["folder\t→\tdossier"]

// The new-job form's "More language pairs": other parallel datasets that declare their languages, ticked to train
// one model for every pair (POST /v1/jobs `pairs`: each source begins with its target language's token, >>fr<<),
// with the temperature the pairs are sampled at. The training dataset picked above is the first pair.

import { languagesText } from "./datasets.js";
import { field, h } from "./ui.js";

const DEFAULT_TEMPERATURE = 5;  // model/train/settings.py's pair_temperature (Arivazhagan et al., 2019)

/** {el, fill(datasets, mainId), pairs(mainId), names(), temperature()}: pairs() is null and names() empty while no
 * other pair is ticked; names() are the pairs as the metrics name them ("en-fr"), the training dataset's first. */
export function pairPicker(onChange) {
  const list = h("ul", { id: "more-pairs", class: "checklist" });
  const temperature = h("input", { id: "pair-temperature", name: "pair-temperature", type: "number",
                                   inputmode: "decimal", min: 1, max: 100, step: "any",
                                   placeholder: String(DEFAULT_TEMPERATURE) });
  const temperatureField = field("Pair temperature", temperature,
    "each pair's share of the rows follows its size to the power 1/T: 1 samples by size, larger values give the small pairs more");
  const summary = h("summary", {}, "More language pairs: one model for several");
  const el = h("details", { class: "pairs", id: "pairs-picker" }, summary,
    h("p", { class: "muted" }, "Tick the parallel datasets of the other pairs. Each dataset names its pair by the "
      + "languages declared at upload (the training dataset's too); the model learns them all and is asked for a target "
      + "language when it translates."),
    list, temperatureField);
  temperatureField.hidden = true;

  let main = null;  // the training dataset, as fill() last saw it
  const ticked = () => [...list.querySelectorAll("input:checked")].map((box) => box.value);
  function changed() {
    const n = ticked().length;
    temperatureField.hidden = n === 0;
    summary.textContent = n ? `More language pairs: ${n} ticked, ${n + 1} pairs in all`
                            : "More language pairs: one model for several";
    onChange();
  }

  function fill(datasets, mainId) {
    const keep = new Set(ticked());
    main = datasets.find((d) => d.id === mainId) || null;
    const declared = datasets.filter((d) => d.kind === "parallel" && d.status !== "failed" && d.id !== mainId
                                            && d.source_language && d.target_language);
    list.replaceChildren(...(declared.length ? declared.map((d) => {
      const box = h("input", { type: "checkbox", id: `pair-${d.id}`, value: d.id, checked: keep.has(d.id),
                               "data-pair": `${d.source_language}-${d.target_language}` });
      box.addEventListener("change", changed);
      return h("li", {}, box, h("label", { for: box.id }, `${languagesText(d)}: ${d.name} (${d.id.slice(0, 8)})`));
    }) : [h("li", { class: "muted" }, "no other parallel dataset declares its languages: declare them at upload")]));
    changed();
  }

  return {
    el,
    fill,
    pairs: (mainId) => (ticked().length ? [mainId, ...ticked()].map((id) => ({ dataset_id: id })) : null),
    names: () => {
      const boxes = [...list.querySelectorAll("input:checked")].map((box) => box.dataset.pair);
      const first = main && main.source_language && main.target_language ? [`${main.source_language}-${main.target_language}`] : [];
      return boxes.length ? [...first, ...boxes] : [];
    },
    temperature: () => (temperature.value.trim() === "" ? undefined : Number(temperature.value)),
  };
}

// bert-explain explorer, an image model's part: an image chosen from the disk is sent as
// base64 to /api/explain, and the report's own page (the picture under its patches, the
// method switch, the layer slider, the row of overlays by layer, with LRP a row of overlays
// by relevance: /api/figure?format=html,
// drawn from the report the server keeps) is shown in a frame.
"use strict";

// The chosen file's bytes in base64, or null.
function imageBase64() {
  const file = $("image").files[0];
  if (!file) return Promise.resolve(null);
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).split(",")[1] || "");
    reader.onerror = () => reject(new Error(`cannot read ${file.name}`));
    reader.readAsDataURL(file);
  });
}

// The request for the chosen image: its bytes and the page's methods, LRP and discard ratio.
async function imageRequest() {
  const image = await imageBase64();
  if (image === null) throw new Error("choose an image file first");
  const body = { image };
  const mixing = [...document.querySelectorAll("#mixings input:checked")].map((c) => c.value);
  if (mixing.length > 0) body.mixing = mixing;
  if ($("lrp").checked) body.lrp = true;
  const discard = Number($("discard-ratio").value);
  if (discard > 0) body.discard_ratio = discard;
  return body;
}

async function explainImage() {
  $("error").textContent = "";
  try {
    const body = await imageRequest();
    state.reports = [await explained(body)];
    state.imageBody = body;
    const page = await api("/api/figure?format=html", body).then((r) => r.text());
    $("image-page").srcdoc = page;
    $("image-view").hidden = false;
  } catch (e) {
    $("error").textContent = e.message;
  }
}

// The explorer for an image model: a file chooser where the texts are, the page in a frame.
function startImage() {
  for (const id of ["text-a", "text-b"]) $(id).hidden = true;
  $("compare").closest("label").hidden = true;
  // LRP needs a head: a checkpoint without one has no label to explain.
  $("lrp").closest("label").hidden = !classifier();
  $("encoder-options").hidden = true;
  const chooser = el("input", { type: "file", id: "image", accept: "image/png,image/jpeg,image/webp,image/gif", "aria-label": "image" });
  $("text-a").before(chooser);
  const discard = el("label", { title: "vit-explain's discard_ratio: this fraction of each layer's smallest entries set to zero before rollout and flow" });
  discard.append("discard ratio ", el("input", { id: "discard-ratio", type: "number", min: "0", max: "0.99", step: "0.05", value: "0" }));
  $("mixings").before(discard);
  $("explain").addEventListener("click", explainImage);
  for (const button of document.querySelectorAll("#image-view .downloads button")) {
    button.addEventListener("click", () => downloadImage(button.dataset.format));
  }
  document.body.dataset.started = "true";
}

async function downloadImage(format) {
  if (!state.imageBody) return;
  let blob;
  try {
    blob = format === "json"
      ? new Blob([JSON.stringify(state.reports[0])], { type: "application/json" })
      : await api(`/api/figure?format=${format}`, state.imageBody).then((r) => r.blob());
  } catch (e) {
    $("error").textContent = e.message;
    return;
  }
  save(blob, format);
}

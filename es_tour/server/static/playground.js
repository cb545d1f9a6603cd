// es-tour playground: two methods side by side on one query, through the sidecar's own
// REST API (same origin, so with the caller's own credentials). No libraries, no build.
"use strict";

(() => {
  // The sidecar's root, so the page also works behind a proxy that adds a path prefix.
  const BASE = location.pathname.replace(/\/_tour\/playground\/?$/, "");
  const SIDES = ["left", "right"];
  const FIELDS = ["index", "q", "size", "left", "left_options", "right", "right_options"];
  const LEFT_DEFAULT = "knn";
  const SNIPPET_CHARS = 260;

  const $ = (id) => document.getElementById(id);
  const form = $("search-form");
  const inputs = {
    index: $("index"), q: $("query"), size: $("size"),
    left: $("left-method"), left_options: $("left-options"),
    right: $("right-method"), right_options: $("right-options"),
  };

  let defaults = { method: "tour-hard", methods: [], qrels_suffix: "-qrels" };
  let rightChosen = false; // the right method came from the URL or the user, not the index
  let runs = 0; // a later run makes an earlier one's answers stale
  let devtoolsText = "";

  // --- small helpers ------------------------------------------------------------------

  function el(tag, attributes = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attributes)) {
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else node.setAttribute(key, value);
    }
    for (const child of children) {
      if (child !== null && child !== undefined) {
        node.append(typeof child === "string" ? document.createTextNode(child) : child);
      }
    }
    return node;
  }

  function svg(tag, attributes = {}, text = null) {
    const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
    if (text !== null) node.textContent = text;
    return node;
  }

  function fmt(value, digits = 3) {
    return value === null || value === undefined || Number.isNaN(value)
      ? "—" : Number(value).toFixed(digits);
  }

  function ms(value) {
    if (value === null || value === undefined) return "—";
    return value >= 100 ? Math.round(value).toString() : Number(value).toFixed(1);
  }

  async function api(method, path, body) {
    const options = { method, credentials: "same-origin", headers: {} };
    if (body !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(BASE + path, options);
    } catch (error) {
      return { ok: false, status: 0,
               payload: { error: { type: "network_error", reason: String(error) } } };
    }
    const text = await response.text();
    let payload = text;
    try { payload = text ? JSON.parse(text) : null; } catch (_) { /* not JSON: keep text */ }
    return { ok: response.ok, status: response.status, payload };
  }

  function indexPath(index, tail) {
    return "/" + encodeURIComponent(index) + tail;
  }

  // --- options: "k=10 max_rounds=2" -> {k: 10, max_rounds: 2} -------------------------

  function tokens(text) {
    const out = [];
    let current = "";
    let depth = 0;
    let quoted = false;
    for (const char of text) {
      if (char === '"' && current.slice(-1) !== "\\") quoted = !quoted;
      if (!quoted && (char === "[" || char === "{")) depth += 1;
      if (!quoted && (char === "]" || char === "}")) depth -= 1;
      if (!quoted && depth <= 0 && /[\s,;]/.test(char)) {
        if (current) out.push(current);
        current = "";
      } else {
        current += char;
      }
    }
    if (current) out.push(current);
    return out;
  }

  function parseValue(raw) {
    if (/^-?\d+$/.test(raw)) return Number.parseInt(raw, 10);
    if (/^-?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?$/.test(raw)) return Number.parseFloat(raw);
    if (raw === "true" || raw === "false" || raw === "null") return JSON.parse(raw);
    if (/^["[{]/.test(raw)) return JSON.parse(raw);
    return raw;
  }

  function parseOptions(text) {
    const options = {};
    for (const token of tokens(text.trim())) {
      const at = token.indexOf("=");
      if (at <= 0) {
        throw new Error(`options must be key=value pairs; cannot read [${token}]`);
      }
      const key = token.slice(0, at).trim();
      if (key === "method") {
        throw new Error("choose the method in the Method list, not in the options");
      }
      try {
        options[key] = parseValue(token.slice(at + 1).trim());
      } catch (error) {
        throw new Error(`cannot read the value of [${key}]: ${error.message}`);
      }
    }
    return options;
  }

  // --- state: the form <-> the URL ----------------------------------------------------

  function readForm() {
    const state = {};
    for (const name of FIELDS) state[name] = inputs[name].value.trim();
    return state;
  }

  function writeForm(state) {
    for (const name of FIELDS) {
      const value = state[name];
      if (value === undefined || value === null) continue;
      if (inputs[name].tagName === "SELECT") setMethod(inputs[name], value);
      else inputs[name].value = value;
    }
  }

  function stateFromUrl() {
    const params = new URLSearchParams(location.search);
    const state = {};
    for (const name of FIELDS) if (params.has(name)) state[name] = params.get(name);
    return state;
  }

  function urlFor(state) {
    const params = new URLSearchParams();
    for (const name of FIELDS) if (state[name]) params.set(name, state[name]);
    return location.pathname + "?" + params.toString();
  }

  function searchBody(state, side) {
    const size = Number.parseInt(state.size, 10);
    return {
      size: Number.isFinite(size) ? size : 10,
      query: { multi_match: { query: state.q } },
      ext: { tour: { method: state[side], ...parseOptions(state[`${side}_options`]) } },
    };
  }

  function devtoolsRequest(state) {
    return `GET ${indexPath(state.index, "/_search")}\n` +
      JSON.stringify(searchBody(state, "right"), null, 2);
  }

  // --- the index: its configured method, its judgements -------------------------------

  function fillSelect(select, methods, chosen) {
    select.replaceChildren(...methods.map((name) => el("option", { value: name, text: name })));
    if (chosen) setMethod(select, chosen);
  }

  function setMethod(select, name) {
    if (![...select.options].some((option) => option.value === name)) {
      select.append(el("option", { value: name, text: name }));
    }
    select.value = name;
  }

  async function indexMethod(index) {
    const answer = await api("GET", indexPath(index, "/_settings/index.tour.*?flat_settings=true"));
    if (!answer.ok || !answer.payload || typeof answer.payload !== "object") return null;
    for (const entry of Object.values(answer.payload)) {
      const method = entry && entry.settings && entry.settings["index.tour.method"];
      if (method) return method;
    }
    return null;
  }

  async function resolveRightMethod() {
    if (rightChosen) return;
    const index = inputs.index.value.trim();
    const method = (index && await indexMethod(index)) || defaults.method;
    if (!rightChosen) setMethod(inputs.right, method);
  }

  async function loadIndices() {
    const answer = await api("GET", "/_cat/indices?format=json&h=index&s=index");
    if (!answer.ok || !Array.isArray(answer.payload)) return;
    const names = answer.payload.map((row) => row.index)
      .filter((name) => name && !name.startsWith(".") && !name.endsWith(defaults.qrels_suffix));
    $("index-list").replaceChildren(...names.map((name) => el("option", { value: name })));
  }

  async function loadJudgedQueries() {
    const index = inputs.index.value.trim();
    const list = $("judged-list");
    list.replaceChildren();
    if (!index) return;
    const answer = await api("POST", qrelsSearch(index),
                             { size: 200, _source: ["query"], sort: [{ query: "asc" }] });
    if (!answer.ok || !answer.payload.hits) return;
    const queries = [...new Set(answer.payload.hits.hits.map((hit) => hit._source.query))];
    list.replaceChildren(...queries.map((text) => el("option", { value: text })));
  }

  // The side index of judgements; a missing one answers an empty search (no shards).
  function qrelsSearch(index) {
    return indexPath(index + defaults.qrels_suffix, "/_search?ignore_unavailable=true");
  }

  // {available: false} when the index has no side index of judgements;
  // otherwise {available: true, judged, relevance: {doc id: grade}}.
  async function judgements(index, query) {
    const answer = await api("POST", qrelsSearch(index), { size: 50, query: { term: { query } } });
    if (!answer.ok || !answer.payload._shards || !answer.payload._shards.total) {
      return { available: false };
    }
    const relevance = {};
    for (const hit of answer.payload.hits.hits) {
      Object.assign(relevance, hit._source.judgements || {});
    }
    return { available: true, judged: answer.payload.hits.hits.length > 0, relevance };
  }

  // --- measures -----------------------------------------------------------------------

  // nDCG@10 with linear gains, as trec_eval (and so es-tour eval) computes it.
  function ndcg10(ids, relevance) {
    let dcg = 0;
    ids.slice(0, 10).forEach((id, rank) => {
      const gain = relevance[id] || 0;
      if (gain > 0) dcg += gain / Math.log2(rank + 2);
    });
    const ideal = Object.values(relevance).filter((g) => g > 0).sort((a, b) => b - a);
    let idcg = 0;
    ideal.slice(0, 10).forEach((gain, rank) => { idcg += gain / Math.log2(rank + 2); });
    return idcg > 0 ? dcg / idcg : 0;
  }

  function roundRanking(round) {
    return round.ranking || [];  // every method's round carries the ranking it would return
  }

  // --- rendering ----------------------------------------------------------------------

  function columnParts(side) {
    const column = $(side);
    column.querySelectorAll(":scope > :not(h2)").forEach((node) => node.remove());
    column.append($("column-body").content.cloneNode(true));
    return {
      column,
      error: column.querySelector(".error"),
      result: column.querySelector(".result"),
      summary: column.querySelector(".summary"),
      parameters: column.querySelector(".parameters dl"),
      chart: column.querySelector(".chart"),
      measure: column.querySelector("th.measure"),
      rounds: column.querySelector("table.rounds tbody"),
      hits: column.querySelector("ol.hits"),
    };
  }

  function showError(parts, status, payload) {
    const error = payload && typeof payload === "object" && payload.error;
    const type = error && typeof error === "object" ? error.type : "error";
    const reason = error && typeof error === "object" ? error.reason
      : (typeof error === "string" ? error : String(payload));
    parts.error.replaceChildren(
      el("span", { class: "error-type", text: status ? `${status} ${type}` : type }),
      el("span", { class: "error-reason", text: reason || "" }),
    );
    if (payload && typeof payload === "object") {
      parts.error.append(el("details", {}, el("summary", { text: "Response" }),
                            el("pre", { text: JSON.stringify(payload, null, 2) })));
    }
    parts.error.hidden = false;
    parts.result.hidden = true;
  }

  function drawChart(figure, values, judged, method) {
    const caption = figure.querySelector("figcaption");
    const points = values.map((value, round) => ({ round, value }))
      .filter((point) => point.value !== null && point.value !== undefined);
    if (!points.length) {
      caption.textContent = `No chart: ${method} does not run the labeler, and this query ` +
        "has no judgements.";
      return;
    }
    const label = judged ? "nDCG@10 by round" : "Labeler mass of the top 10 (Σφ) by round";
    caption.textContent = label;
    const width = 320, height = 136, left = 38, right = 26, top = 22, bottom = 24;
    let low = judged ? 0 : Math.min(...points.map((p) => p.value));
    let high = judged ? 1 : Math.max(...points.map((p) => p.value));
    if (high - low < 1e-9) { low -= 0.5; high += 0.5; }
    const pad = judged ? 0 : (high - low) * 0.12;
    low -= pad; high += pad;
    const x = (round) => values.length === 1 ? left + (width - left - right) / 2
      : left + (round / (values.length - 1)) * (width - left - right);
    const y = (value) => top + (1 - (value - low) / (high - low)) * (height - top - bottom);
    const chart = svg("svg", {
      viewBox: `0 0 ${width} ${height}`, role: "img",
      "aria-label": `${label}: ` + points.map((p) => `round ${p.round} ${fmt(p.value)}`).join(", "),
    });
    for (const tick of [low, (low + high) / 2, high]) {
      chart.append(svg("line", { class: "grid", x1: left, x2: width - right, y1: y(tick), y2: y(tick) }));
      chart.append(svg("text", { x: left - 4, y: y(tick) + 4, "text-anchor": "end" },
                       fmt(tick, judged ? 1 : 2)));
    }
    chart.append(svg("line", { class: "axis", x1: left, x2: left, y1: top, y2: height - bottom }));
    chart.append(svg("line", { class: "axis", x1: left, x2: width - right,
                               y1: height - bottom, y2: height - bottom }));
    values.forEach((_, round) => {
      chart.append(svg("text", { x: x(round), y: height - 7, "text-anchor": "middle" },
                       `r${round}`));
    });
    if (points.length > 1) {
      chart.append(svg("polyline", {
        class: "line", points: points.map((p) => `${x(p.round)},${y(p.value)}`).join(" "),
      }));
    }
    const last = values.length - 1;
    for (const point of points) {
      // labels lean inwards at the ends, so they clear the axis and the edge
      const anchor = last === 0 ? "middle"
        : point.round === 0 ? "start" : point.round === last ? "end" : "middle";
      chart.append(svg("circle", { class: "dot", cx: x(point.round), cy: y(point.value), r: 3.5 }));
      chart.append(svg("text", { class: "value", x: x(point.round), y: y(point.value) - 7,
                                 "text-anchor": anchor }, fmt(point.value, judged ? 3 : 2)));
    }
    figure.append(chart);
  }

  function deltaText(round) {
    if (round.delta_q_norm !== undefined) return `‖Δq‖ ${fmt(round.delta_q_norm)}`;
    if (round.chosen) return round.chosen;
    return "—";
  }

  function retrieverBadge(by) {
    if (by.length > 1) return el("span", { class: "badge both", text: "BM25 + kNN" });
    if (by[0] === "bm25") return el("span", { class: "badge bm25", text: "BM25" });
    if (by[0] === "knn") return el("span", { class: "badge knn", text: "kNN" });
    return null;
  }

  function snippet(source) {
    const text = String(source.text ?? source.body ?? source.content ?? "");
    if (text.length <= SNIPPET_CHARS) return text;
    const cut = text.slice(0, SNIPPET_CHARS);
    return cut.slice(0, Math.max(cut.lastIndexOf(" "), SNIPPET_CHARS - 40)) + " …";
  }

  function renderColumn(side, state, answer, judged, otherIds) {
    const parts = columnParts(side);
    const method = state[side];
    $(`${side}-title`).textContent = `${side === "left" ? "Left" : "Right"} · ${method}`;
    if (!answer.ok) {
      showError(parts, answer.status, answer.payload);
      return;
    }
    const payload = answer.payload;
    const tour = (payload.ext && payload.ext.tour) || {};
    const hits = payload.hits.hits;
    const traces = new Map((tour.hits || []).map((trace) => [trace._id, trace]));
    const relevance = judged.judged ? judged.relevance : null;
    const rounds = tour.rounds || [];

    // summary
    const summary = [el("strong", { text: tour.method || method }),
      ` · ${rounds.length} round${rounds.length === 1 ? "" : "s"}`,
      ` · ${tour.pairs_scored ?? 0} pairs scored`,
      ` · ${tour.engine_calls ?? "?"} engine calls`,
      ` · ${ms(payload.took)} ms`];
    if (relevance) {
      summary.push(" · nDCG@10 ", el("strong", { class: "ndcg",
        text: fmt(ndcg10(hits.map((hit) => hit._id), relevance)) }));
    }
    if (tour.degraded) {
      summary.push(" · ", el("span", { class: "warning",
        text: `degraded: the refinement ran past its deadline, round 0 (${tour.fallback}) shown` }));
    }
    parts.summary.replaceChildren(...summary);

    // parameters, with where each came from
    const origins = tour.origins || {};
    parts.parameters.replaceChildren(...Object.entries(tour.parameters || {}).flatMap(
      ([key, value]) => [el("dt", { text: key }),
        el("dd", {}, JSON.stringify(value),
           origins[key] ? el("span", { class: "origin", text: ` (${origins[key]})` }) : null)]));

    // chart: nDCG@10 when judged, otherwise the labeler mass of each round's top 10
    const values = rounds.map((round) => relevance ? ndcg10(roundRanking(round), relevance)
      : (round.label_mass_at_10 ?? null));
    drawChart(parts.chart, values, Boolean(relevance), tour.method || method);

    // per round
    parts.measure.textContent = relevance ? "nDCG@10" : "Σφ@10";
    parts.rounds.replaceChildren(...rounds.map((round, i) => el("tr", {},
      el("th", { scope: "row", text: String(round.round ?? i) }),
      el("td", { text: String(round.new_docs ?? "—") }),
      el("td", { text: String(round.newly_scored ?? 0) }),
      el("td", { class: "dq", text: deltaText(round),
                 title: round.query && round.query.lucene ? round.query.lucene : "" }),
      el("td", { text: fmt(values[i]) }),
      el("td", { text: ms(round.engine_ms) }),
      el("td", { text: ms(round.model_ms) }),
      el("td", { text: ms(round.total_ms) }),
    )));

    // hits
    parts.hits.replaceChildren(...hits.map((hit, rank) => {
      const trace = traces.get(hit._id) || {};
      const source = hit._source || {};
      const grade = relevance ? (relevance[hit._id] || 0) : 0;
      const head = el("div", { class: "hit-head" },
        el("span", { class: "rank", text: `${rank + 1}.` }),
        el("span", { class: "doc-id", text: hit._id }),
        trace.round !== undefined && trace.round !== null
          ? el("span", { class: "badge round", text: `round ${trace.round}` }) : null,
        retrieverBadge(trace.retrieved_by || []),
        trace.label !== undefined && trace.label !== null
          ? el("span", { class: "badge label", title: "labeler score φ",
                         text: `φ ${fmt(trace.label)}` }) : null,
        grade > 0 ? el("span", { class: "badge rel", text: "✓ relevant" }) : null,
        otherIds && !otherIds.has(hit._id)
          ? el("span", { class: "badge only",
                         text: `not on the ${side === "left" ? "right" : "left"}` }) : null,
      );
      return el("li", { class: grade > 0 ? "hit relevant" : "hit", "data-id": hit._id,
                        "data-round": String(trace.round ?? ""),
                        "data-retrieved-by": (trace.retrieved_by || []).join(" ") },
        head,
        el("div", { class: "hit-title", text: String(source.title ?? "") || "(no title)" }),
        el("p", { class: "snippet", text: snippet(source) }));
    }));
    parts.error.hidden = true;
    parts.result.hidden = false;
  }

  // --- running a comparison -----------------------------------------------------------

  function invalid(input, message) {
    input.setAttribute("aria-invalid", "true");
    input.focus();
    $("status").textContent = message;
  }

  async function run({ push = true } = {}) {
    for (const input of Object.values(inputs)) input.removeAttribute("aria-invalid");
    const state = readForm();
    if (!state.index) return invalid(inputs.index, "Name an index to search.");
    if (!state.q) return invalid(inputs.q, "Type a query.");
    const url = urlFor(state);
    if (push && url !== location.pathname + location.search) history.pushState(state, "", url);
    $("permalink").href = url;

    const run = ++runs;
    const bodies = {};
    for (const side of SIDES) {
      try {
        bodies[side] = searchBody(state, side);
      } catch (error) {
        inputs[`${side}_options`].setAttribute("aria-invalid", "true");
        bodies[side] = { error: { type: "invalid_options", reason: error.message } };
      }
    }
    devtoolsText = bodies.right.ext ? devtoolsRequest(state) : "";
    $("copy-devtools").disabled = !devtoolsText;
    if (!$("devtools-panel").hidden) $("devtools").value = devtoolsText;

    $("status").textContent = "Searching…";
    $("run").disabled = true;
    SIDES.forEach((side) => $(side).setAttribute("aria-busy", "true"));
    const path = indexPath(state.index, "/_search");
    const answers = await Promise.all(SIDES.map((side) => bodies[side].ext
      ? api("POST", path, bodies[side])
      : Promise.resolve({ ok: false, status: 0, payload: bodies[side] })));
    const judged = await judgements(state.index, state.q);
    if (run !== runs) return; // a newer search has started
    const ids = answers.map((answer) => answer.ok
      ? new Set(answer.payload.hits.hits.map((hit) => hit._id)) : null);
    SIDES.forEach((side, i) => {
      renderColumn(side, state, answers[i], judged, ids[1 - i]);
      $(side).setAttribute("aria-busy", "false");
    });
    $("run").disabled = false;
    const note = !judged.available ? "no judgements for this index (es-tour index --qrels stores them)"
      : judged.judged ? "judged query: relevant hits are marked" : "this query has no judgements";
    $("status").textContent = `Done; ${note}.`;
    document.body.dataset.ran = String(run);
  }

  async function copyDevtools() {
    const area = $("devtools");
    $("devtools-panel").hidden = false;
    area.value = devtoolsText;
    let copied = false;
    try {
      if (navigator.clipboard && window.isSecureContext) {
        await navigator.clipboard.writeText(devtoolsText);
        copied = true;
      }
    } catch (_) { /* fall back to selecting the text */ }
    if (!copied) {
      area.focus();
      area.select();
      try { copied = document.execCommand("copy"); } catch (_) { copied = false; }
    }
    $("status").textContent = copied ? "Copied the Dev Tools request."
      : "Select the request below and copy it.";
  }

  // --- start --------------------------------------------------------------------------

  async function start() {
    const answer = await api("GET", "/_tour/playground/defaults");
    if (answer.ok) defaults = answer.payload;
    const fromUrl = stateFromUrl();
    fillSelect(inputs.left, defaults.methods, fromUrl.left || LEFT_DEFAULT);
    fillSelect(inputs.right, defaults.methods, fromUrl.right || defaults.method);
    rightChosen = Boolean(fromUrl.right);
    writeForm(fromUrl);
    $("permalink").href = urlFor(readForm());

    form.addEventListener("submit", (event) => { event.preventDefault(); run(); });
    inputs.right.addEventListener("change", () => { rightChosen = true; });
    inputs.index.addEventListener("change", () => { resolveRightMethod(); loadJudgedQueries(); });
    $("copy-devtools").addEventListener("click", copyDevtools);
    window.addEventListener("popstate", () => {  // Back and Forward restore each search
      const state = stateFromUrl();
      writeForm({ index: "", q: "", size: "10", left_options: "", right_options: "", ...state,
                  left: state.left || LEFT_DEFAULT, right: state.right || inputs.right.value });
      rightChosen = Boolean(state.right);
      if (inputs.index.value && inputs.q.value) run({ push: false });
    });

    loadIndices();
    await Promise.all([resolveRightMethod(), loadJudgedQueries()]);
    document.body.dataset.ready = "true";
    if (inputs.index.value.trim() && inputs.q.value.trim()) await run({ push: false });
    else (inputs.index.value.trim() ? inputs.q : inputs.index).focus();
  }

  start();
})();

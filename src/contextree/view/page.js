"use strict";
// The contextree session viewer. It reads the session from the JSON block in the page and
// builds every node with createElement and textContent: nothing from the session is ever
// parsed as HTML. Only the selected branch's messages are in the document, a window of them
// at a time.
(function () {
  var T0 = performance.now();
  var D = JSON.parse(document.getElementById("ct-data").textContent);
  var T_PARSE = performance.now() - T0;
  var E = D.entries, P = D.parents, N = E.length;
  var LABELS = D.labels || {}, COMP = D.compactions || {};
  var WINDOW = 60, MAXWIN = 300;

  // -- the tree -------------------------------------------------------------------------
  var kids = new Array(N);
  for (var k = 0; k < N; k++) kids[k] = null;
  var roots = [];
  for (k = 0; k < N; k++) {
    if (E[k].t === "leaf") continue;
    var p = P[k];
    if (p < 0) roots.push(k);
    else (kids[p] || (kids[p] = [])).push(k);
  }
  function childrenOf(k) { return k < 0 ? roots : (kids[k] || []); }
  function lastLeaf(k) { // the newest leaf under k: the last child, all the way down
    for (;;) { var c = kids[k]; if (!c || !c.length) return k; k = c[c.length - 1]; }
  }
  var sizes = null;
  function sizeOf(k) { // entries under k (k included), computed once for all
    if (!sizes) {
      sizes = new Int32Array(N);
      for (var i = N - 1; i >= 0; i--) { if (E[i].t === "leaf") continue; sizes[i] += 1; if (P[i] >= 0) sizes[P[i]] += sizes[i]; }
    }
    return sizes[k];
  }
  function speaker(k) { // the nearest entry at or above k that says something: a branch's title
    for (var i = 0, j = k; i < 50 && j >= 0; i++, j = P[j]) if (E[j].t === "message" || E[j].t === "custom_message") return j;
    return k;
  }
  function pathTo(k) { var out = []; while (k >= 0) { out.push(k); k = P[k]; } return out.reverse(); }
  function leaves() { var out = []; for (var i = 0; i < N; i++) if (E[i].t !== "leaf" && !kids[i]) out.push(i); return out; }

  // -- small DOM helpers ----------------------------------------------------------------
  function el(tag, cls, text) {
    var n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined && text !== null) n.textContent = String(text);
    return n;
  }
  function add(parent) { for (var i = 1; i < arguments.length; i++) if (arguments[i]) parent.appendChild(arguments[i]); return parent; }
  function btn(text, fn, cls) { var b = el("button", cls || "btn", text); b.type = "button"; b.addEventListener("click", function (ev) { ev.stopPropagation(); fn(ev); }); return b; }
  function short(id) { return String(id).slice(0, 8); }
  function firstLine(s, n) { s = String(s || ""); var i = s.indexOf("\n"); var l = i < 0 ? s : s.slice(0, i) + " …"; return l.length > n ? l.slice(0, n - 1) + "…" : l; }
  function textOf(r) {
    var out = [];
    (r.c || []).forEach(function (p) { if (p.s) out.push(p.s); });
    (r.tc || []).forEach(function (c) { out.push(c.name + " " + c.args); });
    if (r.s) out.push(r.s);
    return out.join("\n");
  }
  function titleOf(k) {
    var r = E[k];
    if (r.t === "message") return (r.r || "") + ": " + firstLine(textOf(r), 90);
    if (r.t === "model_change") return "model: " + r.s;
    if (r.t === "compaction") return "compaction: " + firstLine(r.s, 80);
    return r.t.replace(/_/g, " ") + ": " + firstLine(textOf(r), 80);
  }

  // -- markdown, safely: a small renderer that only ever makes text nodes ------------------
  var SAFE_URL = /^(https?:|mailto:)/i;
  function link(href, text) {
    if (!SAFE_URL.test(href)) return document.createTextNode(text === href ? text : text + " (" + href + ")");
    var a = el("a", null, text);
    a.href = href; a.rel = "noopener noreferrer nofollow"; a.target = "_blank";
    return a;
  }
  var INLINE = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([^*]+)\*\*|__([^_]+)__|\*([^*\s][^*]*)\*|\[([^\]]+)\]\(([^)\s]+)\)|(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])/g;
  function inline(parent, s) {
    var re = new RegExp(INLINE.source, "g"); // its own: the calls nest
    var at = 0, m;
    while ((m = re.exec(s))) {
      if (m.index > at) parent.appendChild(document.createTextNode(s.slice(at, m.index)));
      if (m[1]) parent.appendChild(el("code", null, m[2]));
      else if (m[3] || m[4]) inline(parent.appendChild(el("strong")), m[3] || m[4]);
      else if (m[5]) inline(parent.appendChild(el("em")), m[5]);
      else if (m[6]) parent.appendChild(link(m[7], m[6]));
      else if (m[8]) parent.appendChild(link(m[8], m[8]));
      at = re.lastIndex;
    }
    if (at < s.length) parent.appendChild(document.createTextNode(s.slice(at)));
    return parent;
  }
  var KW = /^(def|class|return|if|elif|else|for|while|in|import|from|as|with|try|except|finally|raise|lambda|yield|async|await|pass|break|continue|function|var|let|const|new|this|fn|pub|impl|struct|enum|match|use|mod|func|package|type|interface|go|defer|select|case|switch|default|do|then|fi|done|esac|echo|export|local|true|false|True|False|None|null|nil|undefined|not|and|or|is)$/;
  var TOKEN = /(#[^\n]*|\/\/[^\n]*|\/\*[\s\S]*?\*\/)|("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\]|\\.)*`)|\b(\d+(?:\.\d+)?)\b|\b([A-Za-z_][A-Za-z0-9_]*)\b/g;
  function highlight(code, text, lang) {
    if (text.length > 200000 || lang === "text" || lang === "txt") { code.textContent = text; return; }
    var hashComments = !/^(js|javascript|ts|typescript|go|rust|rs|c|cpp|java|css|json)$/.test(lang || "");
    TOKEN.lastIndex = 0;
    var at = 0, m;
    while ((m = TOKEN.exec(text))) {
      var cls = null;
      if (m[1]) cls = (m[1][0] === "#" && !hashComments) ? null : "hc";
      else if (m[2]) cls = "hs";
      else if (m[3]) cls = "hn";
      else if (m[4] && KW.test(m[4])) cls = "hk";
      if (!cls) continue;
      if (m.index > at) code.appendChild(document.createTextNode(text.slice(at, m.index)));
      code.appendChild(el("span", cls, m[0]));
      at = TOKEN.lastIndex;
    }
    if (at < text.length) code.appendChild(document.createTextNode(text.slice(at)));
  }
  function codeBlock(text, lang) {
    var pre = el("pre"), code = el("code");
    highlight(code, text, (lang || "").toLowerCase());
    pre.appendChild(code);
    return pre;
  }
  function markdown(src) {
    var box = el("div", "md");
    var lines = String(src).split("\n"), i = 0, para = [];
    function flush() { if (para.length) { inline(box.appendChild(el("p")), para.join("\n")); para = []; } }
    while (i < lines.length) {
      var line = lines[i], m;
      if ((m = /^\s*(```+|~~~+)\s*([\w+#.-]*)/.exec(line))) {
        flush();
        var fence = m[1], body = [];
        i++;
        while (i < lines.length && lines[i].trim().indexOf(fence) !== 0) body.push(lines[i++]);
        i++;
        box.appendChild(codeBlock(body.join("\n"), m[2]));
        continue;
      }
      if ((m = /^(#{1,6})\s+(.*)$/.exec(line))) { flush(); inline(box.appendChild(el("h" + Math.min(6, m[1].length + 2))), m[2]); i++; continue; }
      if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) { flush(); box.appendChild(el("hr")); i++; continue; }
      if (/^\s*>/.test(line)) {
        flush();
        var quote = [];
        while (i < lines.length && /^\s*>/.test(lines[i])) quote.push(lines[i++].replace(/^\s*> ?/, ""));
        box.appendChild(el("blockquote")).appendChild(markdown(quote.join("\n")));
        continue;
      }
      if ((m = /^\s*([-*+]|\d+[.)])\s+/.exec(line))) {
        flush();
        var list = el(/\d/.test(m[1]) ? "ol" : "ul");
        while (i < lines.length && (m = /^\s*([-*+]|\d+[.)])\s+(.*)$/.exec(lines[i]))) { inline(list.appendChild(el("li")), m[2]); i++; }
        box.appendChild(list);
        continue;
      }
      if (!line.trim()) { flush(); i++; continue; }
      para.push(line); i++;
    }
    flush();
    return box;
  }

  // -- messages -------------------------------------------------------------------------
  var LONG_LINES = 24, LONG_CHARS = 3000;
  function isLong(s) { return s.length > LONG_CHARS || s.split("\n", LONG_LINES + 1).length > LONG_LINES; }
  function folded(summaryText, body, open) {
    var d = el("details"); if (open) d.open = true;
    d.appendChild(el("summary", null, summaryText));
    var filled = false;
    function fill() { if (!filled) { filled = true; d.appendChild(body()); } }
    if (open) fill(); else d.addEventListener("toggle", fill);
    return d;
  }
  function parts(box, r, asCode, unfolded) {
    (r.c || []).forEach(function (p) {
      if (p.k === "text") {
        if (asCode) {
          if (isLong(p.s) && !unfolded) box.appendChild(folded(firstLine(p.s, 100) + "  (" + p.s.split("\n").length + " lines)", function () { return codeBlock(p.s, "text"); }));
          else box.appendChild(codeBlock(p.s, "text"));
        } else box.appendChild(markdown(p.s));
      } else if (p.k === "think") {
        box.appendChild(folded("thinking (" + p.s.length + " characters)", function () { return add(el("div", "think"), markdown(p.s)); }));
      } else if (p.k === "img") {
        var img = el("img"); img.alt = "image from the session"; img.src = p.src; img.loading = "lazy";
        box.appendChild(img);
      } else box.appendChild(el("div", "small", p.s));
    });
  }
  function resultFor(path, from, callId) { // the tool result answering callId on the branch
    for (var j = from + 1; j < path.length && j < from + 400; j++) {
      var r = E[path[j]];
      if (r.t === "message" && r.r === "tool" && r.tid === callId) return path[j];
      if (r.t === "message" && r.r !== "tool" && j > from + 1) break;
    }
    return -1;
  }
  function toolCall(c, resK) {
    var res = resK >= 0 ? E[resK] : null;
    var box = el("div", "call" + (res && res.err ? " err" : ""));
    var head = el("div", "small");
    head.textContent = "tool call " + c.name + (res ? (res.err ? " → error" : " → result") : " (no result)") + (res && res.cut ? " · cut to " + res.cut.shown + " of " + res.cut.total + " lines" + (res.cut.saved ? ", original at " + res.cut.saved : "") : "");
    box.appendChild(head);
    var args = c.args || "{}";
    if (isLong(args)) box.appendChild(folded("arguments", function () { return codeBlock(args, "json"); }));
    else box.appendChild(codeBlock(args, "json"));
    if (res) {
      var txt = textOf(res);
      box.appendChild(folded("result" + (isLong(txt) ? " (" + txt.split("\n").length + " lines)" : ""), function () { var b = el("div"); parts(b, res, true, true); return b; }, !isLong(txt)));
      box.setAttribute("data-result", res.id);
    }
    return box;
  }
  function entryView(path, j, paired) {
    var k = path[j], r = E[k], cls = r.t === "message" ? r.r : r.t;
    if (r.t === "message" && r.r === "tool" && paired[k]) return null;
    if (r.t === "label" || r.t === "leaf") return null;
    if (r.t === "model_change" || r.t === "thinking_level_change" || r.t === "active_tools_change" || r.t === "session_info" || r.t === "custom") {
      var s = el("div", "small", r.t.replace(/_/g, " ") + ": " + (r.s || ""));
      s.setAttribute("data-k", k); s.id = "e" + k;
      return s;
    }
    var box = el("div", "msg " + cls);
    box.setAttribute("data-k", k); box.id = "e" + k;
    var head = el("div", "mh");
    add(head, el("b", null, r.t === "message" ? r.r : r.t.replace(/_/g, " ")), r.m ? el("span", "chip model", r.m) : null,
      LABELS[k] ? el("span", "chip", "label: " + LABELS[k]) : null, el("span", null, short(r.id)), el("span", null, (r.ts || "").replace("T", " ").slice(0, 19)));
    if (r.u) head.appendChild(el("span", null, (r.u[0] + r.u[2] + r.u[3]) + " in / " + r.u[1] + " out" + (r.u[4] !== null && r.u[4] !== undefined ? " · $" + r.u[4].toFixed(4) : "")));
    var sp = el("span", "sp");
    sp.appendChild(btn("what the model saw here", function () { showContext(k); }, "btn saw"));
    if (r.t === "compaction") sp.appendChild(btn("receipt", function () { showReceipt(k); }, "btn receipt"));
    head.appendChild(sp);
    box.appendChild(head);
    var body = el("div", "mb");
    if (r.t === "compaction") {
      body.appendChild(el("div", "small", "compacted " + r.tb + " tokens" + (r.ta ? " → " + r.ta : "") + "; the model sees this summary instead of what came before"));
      body.appendChild(markdown(r.s || ""));
    } else if (r.t === "branch_summary") {
      body.appendChild(el("div", "small", "returned from another branch; its summary:"));
      body.appendChild(markdown(r.s || ""));
    } else {
      if (r.k) body.appendChild(el("div", "small", "marked: " + r.k));
      parts(body, r, r.r === "tool");
      (r.tc || []).forEach(function (c) {
        var rk = resultFor(path, j, c.id);
        if (rk >= 0) paired[rk] = true;
        body.appendChild(toolCall(c, rk));
      });
    }
    box.appendChild(body);
    return box;
  }

  // -- the selected branch: a window of its messages ------------------------------------
  var state = { leaf: D.leaf >= 0 ? D.leaf : (N ? lastLeaf(roots[roots.length - 1]) : -1), path: [], lo: 0, hi: 0 };
  var msgs = document.getElementById("msgs");
  var list = el("div");
  var before = el("button", "more", "show earlier messages"), after = el("button", "more", "show later messages");
  before.type = after.type = "button";
  before.addEventListener("click", function () { grow(-1); });
  after.addEventListener("click", function () { grow(1); });
  var chart = el("div"); chart.id = "chart";
  add(msgs, chart, before, list, after);
  var paired = {};
  function renderWindow(lo, hi) {
    var path = state.path;
    state.lo = Math.max(0, lo); state.hi = Math.min(path.length, hi);
    list.textContent = "";
    paired = {};
    var frag = document.createDocumentFragment();
    for (var j = state.lo; j < state.hi; j++) { var v = entryView(path, j, paired); if (v) frag.appendChild(v); }
    list.appendChild(frag);
    before.style.display = state.lo > 0 ? "" : "none";
    after.style.display = state.hi < path.length ? "" : "none";
    before.textContent = "show earlier messages (" + state.lo + " more)";
    after.textContent = "show later messages (" + (path.length - state.hi) + " more)";
  }
  function grow(dir) {
    var lo = state.lo, hi = state.hi;
    if (dir < 0) { lo = Math.max(0, lo - WINDOW); if (hi - lo > MAXWIN) hi = lo + MAXWIN; }
    else { hi = Math.min(state.path.length, hi + WINDOW); if (hi - lo > MAXWIN) lo = hi - MAXWIN; }
    var anchor = dir < 0 ? list.firstChild : null, top = anchor ? anchor.getBoundingClientRect().top : 0;
    renderWindow(lo, hi);
    if (anchor && anchor.id) { var again = document.getElementById(anchor.id); if (again) msgs.scrollTop += again.getBoundingClientRect().top - top; }
  }
  if ("IntersectionObserver" in window) {
    new IntersectionObserver(function (es) { es.forEach(function (e) { if (e.isIntersecting && state.hi < state.path.length) grow(1); }); }, { root: msgs }).observe(after);
  }
  function select(leaf, focus) {
    state.leaf = leaf;
    state.path = pathTo(leaf);
    var at = focus !== undefined ? state.path.indexOf(focus) : -1;
    if (at < 0) renderWindow(0, WINDOW);
    else renderWindow(at - WINDOW / 2, at + WINDOW / 2);
    drawTree();
    drawChart();
    if (at >= 0) jump(focus); else msgs.scrollTop = 0;
  }
  function jump(k) {
    var at = state.path.indexOf(k);
    if (at < 0) return;
    if (at < state.lo || at >= state.hi) renderWindow(at - WINDOW / 2, at + WINDOW / 2);
    var node = document.getElementById("e" + k);
    if (!node) { var res = list.querySelector('[data-result="' + E[k].id.replace(/[^\w-]/g, "") + '"]'); node = res; }
    if (node) {
      node.scrollIntoView({ block: "center" });
      var prev = list.querySelector(".hit"); if (prev) prev.classList.remove("hit");
      node.classList.add("hit");
    }
  }

  // -- the tree panel: the selected branch's outline, folded at branch points --------------
  var tree = document.getElementById("tree");
  function notable(k, j, path) {
    var r = E[k];
    return j === 0 || j === path.length - 1 || LABELS[k] || r.t === "model_change" || r.t === "compaction" || r.t === "session_info" || r.t === "branch_summary" || (kids[k] && kids[k].length > 1) || (P[k] < 0 && roots.length > 1);
  }
  function nodeRow(k, text, tagText, tagCls) {
    var row = el("div", "node" + (k === state.leaf ? " sel" : ""));
    row.setAttribute("data-k", k);
    if (tagText) row.appendChild(el("span", "chip " + (tagCls || ""), tagText));
    row.appendChild(document.createTextNode(text));
    row.title = titleOf(k);
    row.addEventListener("click", function () { if (state.path.indexOf(k) < 0) select(lastLeaf(k), k); else jump(k); });
    return row;
  }
  function othersList(k, chosen) {
    var box = el("div", "others");
    var cs = childrenOf(k).filter(function (c) { return c !== chosen; });
    var shown = 0;
    function more() {
      var end = Math.min(cs.length, shown + 100);
      for (; shown < end; shown++) (function (c) {
        var row = el("div", "node");
        row.setAttribute("data-k", c);
        row.appendChild(el("span", "tag", "↳ " + sizeOf(c) + (sizeOf(c) === 1 ? " entry" : " entries")));
        row.appendChild(document.createTextNode(titleOf(c)));
        row.title = "open this branch";
        row.addEventListener("click", function () { select(lastLeaf(c), c); });
        box.insertBefore(row, moreBtn);
      })(cs[shown]);
      moreBtn.style.display = shown < cs.length ? "" : "none";
    }
    var moreBtn = btn("more", more); box.appendChild(moreBtn);
    more();
    return box;
  }
  function drawTree() {
    tree.textContent = "";
    var ls = leaves();
    tree.appendChild(el("h2", null, "Branches (" + ls.length + ")"));
    var pick = el("select"); pick.id = "branch-pick"; pick.style.width = "100%";
    ls.slice(-500).forEach(function (l) { var o = el("option", null, short(E[l].id) + " · " + firstLine(titleOf(speaker(l)), 60)); o.value = l; if (l === state.leaf) o.selected = true; pick.appendChild(o); });
    pick.addEventListener("change", function () { select(+pick.value); });
    tree.appendChild(pick);
    tree.appendChild(el("h2", null, "This branch (" + state.path.length + " entries)"));
    var path = state.path, frag = document.createDocumentFragment(), shown = 0;
    for (var j = 0; j < path.length; j++) {
      var k = path[j];
      if (!notable(k, j, path)) continue;
      shown++;
      var r = E[k];
      if (LABELS[k]) frag.appendChild(nodeRow(k, firstLine(titleOf(k), 60), LABELS[k]));
      else if (r.t === "model_change") frag.appendChild(nodeRow(k, r.s, "model", "model"));
      else if (r.t === "compaction") frag.appendChild(nodeRow(k, r.tb + (r.ta ? " → " + r.ta : "") + " tokens", "compaction", "comp"));
      else if (r.t === "session_info") frag.appendChild(nodeRow(k, r.s || "(cleared)", "name", "name"));
      else frag.appendChild(nodeRow(k, firstLine(titleOf(k), 60), j === path.length - 1 ? "leaf" : (j === 0 ? "root" : null)));
      var siblings = j + 1 < path.length ? childrenOf(k) : [];
      if (siblings.length > 1) (function (k, chosen, n) {
        var bp = el("div", "bp");
        bp.setAttribute("data-bp", k);
        bp.appendChild(el("div", "small", "branch point: this branch takes " + short(E[chosen].id)));
        var open = null;
        var toggle = btn(n + " other branch" + (n === 1 ? "" : "es"), function () {
          if (open) { open.remove(); open = null; toggle.setAttribute("aria-expanded", "false"); }
          else { open = bp.appendChild(othersList(k, chosen)); toggle.setAttribute("aria-expanded", "true"); }
        });
        toggle.className = "btn others-toggle";
        toggle.setAttribute("aria-expanded", "false");
        bp.appendChild(toggle);
        frag.appendChild(bp);
      })(k, path[j + 1], siblings.length - 1);
      if (shown > 2000) { frag.appendChild(el("div", "small", "… (outline cut at 2000 rows)")); break; }
    }
    tree.appendChild(frag);
  }

  // -- the chart: tokens and cost per model call on the branch -----------------------------
  var SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attrs) { var n = document.createElementNS(SVG, tag); for (var a in attrs) n.setAttribute(a, attrs[a]); return n; }
  function drawChart() {
    chart.textContent = "";
    var calls = [];
    state.path.forEach(function (k) { var r = E[k]; if (r.u) calls.push(k); });
    if (!calls.length) return;
    var W = 960, H = 90, n = calls.length, maxT = 1, maxC = 0, totalC = 0, totalT = 0, anyCost = false;
    calls.forEach(function (k) { var u = E[k].u, t = u[0] + u[2] + u[3] + u[1]; totalT += t; if (t > maxT) maxT = t; if (u[4] !== null && u[4] !== undefined) { anyCost = true; totalC += u[4]; if (u[4] > maxC) maxC = u[4]; } });
    var s = svg("svg", { viewBox: "0 0 " + W + " " + H, preserveAspectRatio: "none", role: "img" });
    var bw = W / n, step = Math.max(1, Math.floor(n / 960));
    for (var i = 0; i < n; i += step) {
      var u = E[calls[i]].u, inT = u[0] + u[2] + u[3], h1 = (inT / maxT) * (H - 10), h2 = (u[1] / maxT) * (H - 10);
      var g = svg("rect", { x: i * bw, y: H - h1 - h2, width: Math.max(1, bw * step - 1), height: h1, fill: "#9db8ea" });
      g.appendChild(svg("title", {})).textContent = "call " + (i + 1) + ": " + inT + " in, " + u[1] + " out" + (u[4] != null ? ", $" + u[4].toFixed(4) : "");
      s.appendChild(g);
      s.appendChild(svg("rect", { x: i * bw, y: H - h2, width: Math.max(1, bw * step - 1), height: h2, fill: "#2a62c9" }));
    }
    if (anyCost && maxC > 0) {
      var pts = [];
      for (i = 0; i < n; i += step) { var c = E[calls[i]].u[4] || 0; pts.push((i * bw + bw / 2).toFixed(1) + "," + (H - 4 - (c / maxC) * (H - 14)).toFixed(1)); }
      s.appendChild(svg("polyline", { points: pts.join(" "), fill: "none", stroke: "#e8710a", "stroke-width": "1.5" }));
    }
    chart.appendChild(s);
    chart.appendChild(el("div", "legend", n + " model calls on this branch · " + totalT + " tokens (light: input, dark: output)" + (anyCost ? " · cost $" + totalC.toFixed(4) + " (orange line)" : " · cost unknown")));
  }

  // -- the side panel: what the model saw, receipts, search results -----------------------
  var side = document.getElementById("side");
  function openSide(title) {
    side.textContent = "";
    side.appendChild(btn("close", function () { side.classList.remove("open"); }, "btn close"));
    side.appendChild(el("h2", null, title));
    side.classList.add("open");
    side.scrollTop = 0;
    return side;
  }
  function asContext(k) { // the message entry k adds to the context, as a record, or null
    var r = E[k];
    if (r.t === "message") return r;
    if (r.t === "custom_message") return { r: "user", c: r.c };
    if (r.t === "branch_summary") return { r: "system", c: [{ k: "text", s: "The conversation returned here from another branch. Summary of that branch:\n\n" + r.s }] };
    return null;
  }
  // The context at entry k: the context the library built at the latest compaction on the
  // path (its frame), then every entry after it, with the pairing rule build_context applies.
  function contextAt(k) {
    var path = pathTo(k), ci = -1;
    for (var j = path.length - 1; j >= 0; j--) if (E[path[j]].t === "compaction") { ci = j; break; }
    var raw = [], cleared = {};
    if (ci >= 0) {
      var comp = COMP[path[ci]];
      cleared = comp.cleared || {};
      comp.frame.forEach(function (f) { raw.push(f.ref !== undefined ? { m: E[f.ref], k: f.ref, why: null } : { m: f.msg, k: f.from, why: f.why }); });
    }
    for (j = ci + 1; j < path.length; j++) {
      var m = asContext(path[j]);
      if (!m) continue;
      if (cleared[path[j]] !== undefined && m.r === "tool") raw.push({ m: { r: "tool", tid: m.tid, n: m.n, c: [{ k: "text", s: cleared[path[j]] }] }, k: path[j], why: "cleared" });
      else raw.push({ m: m, k: path[j], why: null });
    }
    var out = [], pending = [];
    function close() { pending.forEach(function (c) { out.push({ m: { r: "tool", tid: c.id, n: c.name, err: true, c: [{ k: "text", s: "[no result: the tool call was interrupted before it returned a result]" }] }, k: -1, why: "interrupted" }); }); pending = []; }
    raw.forEach(function (x) {
      if (x.m.r === "tool") {
        for (var i = 0; i < pending.length; i++) if (pending[i].id === x.m.tid) { pending.splice(i, 1); out.push(x); return; }
        return;
      }
      close();
      out.push(x);
      (x.m.tc || []).forEach(function (c) { pending.push(c); });
    });
    close();
    return { items: out, compaction: ci >= 0 ? path[ci] : -1 };
  }
  function showContext(k) {
    var ctx = contextAt(k);
    var s = openSide("What the model saw at " + short(E[k].id));
    s.appendChild(el("div", "small", ctx.items.length + " messages" + (ctx.compaction >= 0 ? "; from compaction " + short(E[ctx.compaction].id) + " on, as it left the context" : "; no compaction on this path")));
    if (ctx.compaction >= 0) s.appendChild(btn("compaction receipt", function () { showReceipt(ctx.compaction); }));
    var box = el("div"); box.id = "context";
    var frag = document.createDocumentFragment();
    ctx.items.slice(0, 2000).forEach(function (x) {
      var c = el("div", "ctx");
      c.setAttribute("data-role", x.m.r);
      c.setAttribute("data-entry", x.k >= 0 ? E[x.k].id : "");
      var head = el("div", "mh");
      add(head, el("b", null, x.m.r), x.why ? el("span", "why", x.why === "entry" ? "from an entry" : x.why) : null, x.k >= 0 ? el("span", null, short(E[x.k].id)) : null);
      if (x.k >= 0) head.appendChild(btn("show", function () { side.classList.remove("open"); if (state.path.indexOf(x.k) < 0) select(lastLeaf(x.k), x.k); else jump(x.k); }));
      c.appendChild(head);
      var b = el("div", "mb");
      parts(b, x.m, x.m.r === "tool");
      (x.m.tc || []).forEach(function (t) { b.appendChild(el("div", "small", "calls " + t.name + " " + firstLine(t.args.replace(/\s+/g, " "), 160))); });
      c.appendChild(b);
      frag.appendChild(c);
    });
    box.appendChild(frag);
    if (ctx.items.length > 2000) box.appendChild(el("div", "small", "… " + (ctx.items.length - 2000) + " more"));
    s.appendChild(box);
  }
  function entryList(ks, what) {
    if (!ks.length) return el("span", null, "none");
    var box = el("div");
    box.appendChild(document.createTextNode(ks.length + " " + what + " "));
    box.appendChild(folded("list them", function () {
      var l = el("div");
      ks.slice(0, 500).forEach(function (k) { var row = nodeRow(k, titleOf(k)); row.addEventListener("click", function () { side.classList.remove("open"); }); l.appendChild(row); });
      return l;
    }));
    return box;
  }
  function showReceipt(k) {
    var rc = COMP[k].receipt, s = openSide("Compaction receipt " + short(E[k].id));
    var t = el("table", "rc"); t.id = "receipt";
    function row(name, value) { var tr = el("tr"); add(tr, el("td", null, name), add(el("td"), typeof value === "string" ? document.createTextNode(value) : value)); t.appendChild(tr); }
    row("tokens", rc.tokens_before + " before" + (rc.tokens_after ? " → " + rc.tokens_after + " after" : ""));
    if (rc.stages.length) row("stages", rc.stages.join(", "));
    row("kept verbatim", entryList(rc.kept, "entries (from " + (rc.first_kept >= 0 ? short(E[rc.first_kept].id) : "after the compaction") + (rc.pinned.length ? ", " + rc.pinned.length + " pinned" : "") + ")"));
    if (rc.retained_tail) row("retained tail", rc.retained_tail + " messages copied into the compaction entry");
    row("folded into the summary", entryList(rc.folded, "entries"));
    if (rc.dropped.length) row("dropped", entryList(rc.dropped, "entries left out of view (nothing of them in the summary)"));
    if (rc.identifiers.length) row("identifiers kept verbatim", rc.identifiers.join(", "));
    var cl = Object.keys(rc.cleared).map(Number);
    row("cleared", entryList(cl, "tool results replaced by a placeholder"));
    row("where the originals are", "every entry above is still in this session, unchanged (a compaction never rewrites history): open it with the tree" + (rc.spills.length ? "; the full text of cut tool results: " + rc.spills.join(", ") : ""));
    row("summary", markdown(rc.summary || "(none)"));
    if (rc.details && rc.details !== "{}") row("details", codeBlock(rc.details, "json"));
    s.appendChild(t);
  }
  var lower = null;
  function search(q) {
    q = q.trim().toLowerCase();
    if (!q) return;
    if (!lower) { lower = new Array(N); for (var i = 0; i < N; i++) lower[i] = textOf(E[i]).toLowerCase(); }
    var hits = [];
    for (i = 0; i < N && hits.length < 200; i++) if (lower[i].indexOf(q) >= 0) hits.push(i);
    var s = openSide("Search: " + q);
    var box = el("div"); box.id = "results";
    s.appendChild(el("div", "small", hits.length >= 200 ? "the first 200 matches" : hits.length + " matches"));
    hits.forEach(function (k) {
      var text = textOf(E[k]), at = lower[k].indexOf(q), from = Math.max(0, at - 40);
      var row = el("div", "sr"); row.setAttribute("data-k", k);
      add(row, el("span", "chip", E[k].t === "message" ? E[k].r : E[k].t), document.createTextNode((from ? "…" : "") + text.slice(from, at)), el("mark", null, text.slice(at, at + q.length)), document.createTextNode(text.slice(at + q.length, at + q.length + 60)));
      row.addEventListener("click", function () { side.classList.remove("open"); var kk = E[k].t === "label" ? E[k].to : k; if (kk < 0) return; if (state.path.indexOf(kk) < 0) select(lastLeaf(kk), kk); else jump(kk); });
      box.appendChild(row);
    });
    s.appendChild(box);
  }
  var q = document.getElementById("q");
  q.addEventListener("keydown", function (ev) { if (ev.key === "Enter") search(q.value); });
  document.addEventListener("keydown", function (ev) { if (ev.key === "Escape") side.classList.remove("open"); });

  if (state.leaf >= 0) select(state.leaf);
  document.body.setAttribute("data-ready-ms", String(Math.round(performance.now())));
  document.body.setAttribute("data-ready", "1");
})();

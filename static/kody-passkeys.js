// Passkeys: <button data-passkey="register|authenticate|verify" data-options="url" data-answer="url">.
// The server's options are JSON with base64url strings; the browser API wants ArrayBuffers,
// and its answer goes back as JSON with base64url strings again.
(() => {
  const toBytes = (s) => {
    const b64 = s.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((s.length + 3) % 4);
    return Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)).buffer;
  };
  const toB64url = (buf) => {
    let s = "";
    for (const b of new Uint8Array(buf)) s += String.fromCharCode(b);
    return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  };
  const csrf = () => document.querySelector("input[name=csrfmiddlewaretoken]")?.value || "";
  const post = async (url, body) => {
    const response = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf() },
      body: JSON.stringify(body || {}),
    });
    const data = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(data.error?.message || "The passkey step failed.");
    return data;
  };
  const creationOptions = (o) => ({
    ...o,
    challenge: toBytes(o.challenge),
    user: { ...o.user, id: toBytes(o.user.id) },
    excludeCredentials: (o.excludeCredentials || []).map((c) => ({ ...c, id: toBytes(c.id) })),
  });
  const requestOptions = (o) => ({
    ...o,
    challenge: toBytes(o.challenge),
    allowCredentials: (o.allowCredentials || []).map((c) => ({ ...c, id: toBytes(c.id) })),
  });
  const answer = (cred) => {
    const r = cred.response;
    const out = {
      id: cred.id,
      rawId: toB64url(cred.rawId),
      type: cred.type,
      clientExtensionResults: cred.getClientExtensionResults(),
      authenticatorAttachment: cred.authenticatorAttachment || undefined,
      response: { clientDataJSON: toB64url(r.clientDataJSON) },
    };
    if (r.attestationObject) {
      out.response.attestationObject = toB64url(r.attestationObject);
      out.response.transports = r.getTransports ? r.getTransports() : [];
    } else {
      out.response.authenticatorData = toB64url(r.authenticatorData);
      out.response.signature = toB64url(r.signature);
      if (r.userHandle) out.response.userHandle = toB64url(r.userHandle);
    }
    return out;
  };

  document.addEventListener("click", async (event) => {
    const button = event.target.closest("button[data-passkey]");
    if (!button) return;
    event.preventDefault();
    const status = document.getElementById(button.dataset.status || "passkey-status");
    const say = (text) => { if (status) status.textContent = text; };
    if (!window.PublicKeyCredential) { say("This browser cannot use passkeys."); return; }
    button.disabled = true;
    try {
      const options = await post(button.dataset.options);
      const ceremony = button.dataset.passkey;
      const cred = ceremony === "register"
        ? await navigator.credentials.create({ publicKey: creationOptions(options) })
        : await navigator.credentials.get({ publicKey: requestOptions(options) });
      const name = document.getElementById("passkey-name")?.value || "";
      const result = await post(button.dataset.answer, { credential: answer(cred), name });
      window.location.assign(result.redirect);
    } catch (error) {
      say(error.name === "NotAllowedError" ? "The passkey step was cancelled." : error.message);
      button.disabled = false;
    }
  });
})();

//# allFunctionsCalledOnLoad
// Volumes: the shared read-only data volumes, each with its size, the running VMs that mount it and its
// source; make one from a folder on the hub's machine, remove one (it asks first; the hub refuses while a
// running VM mounts it), and each role's list (up to four), with Mount and Unmount. A change applies to
// agents spawned after it. Every refusal shows next to the button or form that caused it.

import {del, get, post, put} from "../api.js";
import {action, card, field, form, h, select, table} from "../ui.js";

const MAX_PER_ROLE = 4;

function size(n) {
  for (const [unit, shift] of [["GiB", 30], ["MiB", 20], ["KiB", 10]]) {
    if (n >= 2 ** shift) return `${(n / 2 ** shift).toFixed(1)} ${unit}`;
  }
  return `${n} B`;
}

export async function render(view, ctx) {
  view.append(
    h("p", {class: "lede"}, "Inside a VM each volume is at /data/<name>, read-only: a write gets an I/O error. " +
      "A role's list applies to agents spawned after it is set; agents already running keep theirs."),
    ctx.live(["volumes", "agent"], async () => {
      const {volumes} = await get("/v1/volumes");
      const name = h("input", {name: "name", required: true, maxlength: 20, pattern: "[a-z0-9][a-z0-9\\-]{0,19}",
                               autocomplete: "off", spellcheck: "false"});
      const source = h("input", {name: "source", required: true, autocomplete: "off", spellcheck: "false",
                                 placeholder: "/srv/datasets/corpus"});
      return card("Volumes",
        table([{label: "Name", value: (v) => v.name}, {label: "Size", value: (v) => size(v.size_bytes)},
          {label: "Mounted by", value: (v) => v.mounted_by.length ? v.mounted_by.map((c) => `@${c}`).join(", ") : "—"},
          {label: "Source", value: (v) => h("code", {}, v.source)},
          {label: "", value: (v) => action("Remove", () => del(`/v1/volumes/${encodeURIComponent(v.name)}`).then(() => "Removed."),
            {label: `Remove volume ${v.name}`, kind: "danger", confirm: {title: `Remove volume ${v.name}?`,
              message: "Its image is deleted and the roles that list it lose it. The hub refuses while a running VM mounts it.",
              reason: false, danger: true, yes: "Remove"}})}],
        volumes, {empty: "No volumes yet.", label: "Volumes"}),
        form({label: "New volume", submit: "Create volume", fields: [
          field("Name", name, "1 to 20 of a-z, 0-9 and -; not starting with -"),
          field("Source", source, "an absolute path of a folder on the hub's machine")],
        send: async (_, el) => {
          const made = await post("/v1/volumes", {name: name.value, source: source.value});
          el.reset();
          return made.volume;
        }, done: (v) => `Volume ${v.name} made (${size(v.size_bytes)}).`}));
    }, {label: "Volumes"}),
    ctx.live(["volumes"], async () => {
      const [{roles}, {volumes}] = await Promise.all([get("/v1/volumes/roles"), get("/v1/volumes")]);
      const names = volumes.map((v) => v.name);
      const role = select("role", roles.map((r) => r.role));
      const picks = Array.from({length: MAX_PER_ROLE}, (_, i) => select(`volume${i + 1}`,
        [["", i ? "(none)" : "(choose)"], ...names]));
      return card("Roles",
        table([{label: "Role", value: (r) => r.role},
          {label: "Volumes", value: (r) => r.volumes.length ? r.volumes.join(", ") : "—"},
          {label: "", value: (r) => r.volumes.length ? action("Unmount", () => del(`/v1/volumes/roles/${encodeURIComponent(r.role)}`)
            .then(() => "Unmounted."), {label: `Unmount the volumes of ${r.role}`}) : ""}],
        roles, {label: "Roles and their volumes"}),
        names.length ? form({label: "Mount volumes on a role", submit: "Mount", fields: [field("Role", role),
          ...picks.map((p, i) => field(`Volume ${i + 1}`, p))],
        send: async () => {
          const chosen = picks.map((p) => p.value).filter(Boolean);
          return put(`/v1/volumes/roles/${encodeURIComponent(role.value)}`, {volumes: chosen});
        }, done: (r) => `Role ${r.role} mounts ${r.volumes.join(", ")} (agents spawned from now on).`})
          : h("p", {class: "empty"}, "Make a volume first, then mount it on the roles that need it."));
    }, {label: "Roles"}));
}

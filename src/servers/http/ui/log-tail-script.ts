/**
 * The workload page's only script: follows the job's stdout through the log stream route
 * and appends what arrives. Text only (textContent, never HTML): a job prints what it likes.
 * It keeps the last 64 KiB so a chatty job cannot grow the page without bound.
 */
export const LOG_TAIL_SCRIPT = `(() => {
  const pre = document.getElementById("log");
  const status = document.getElementById("log-status");
  if (!pre || !status) return;
  const url = pre.dataset.src;
  const keep = 65536;
  let text = "";
  const show = (chunk) => {
    const stick = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    text = (text + chunk).slice(-keep);
    pre.textContent = text;
    if (stick) pre.scrollTop = pre.scrollHeight;
  };
  fetch(url, { credentials: "same-origin", cache: "no-store" }).then(async (res) => {
    if (!res.ok || !res.body) {
      status.textContent = res.status === 404 ? "No output yet." : "Log unavailable (" + res.status + ").";
      return;
    }
    status.textContent = "Following the log…";
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      show(decoder.decode(value, { stream: true }));
    }
    status.textContent = "The attempt ended; the log is complete.";
  }).catch(() => { status.textContent = "The log stream was interrupted; reload to resume."; });
})();`;

/**
 * The pages' one stylesheet, inlined with the response's CSP nonce (no file to serve, no
 * CDN). Colours keep WCAG AA contrast on white: axe-core checks it in the browser test.
 */
export const STYLES = `
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1b1f24;background:#f4f6f8}
header{background:#1d2733;color:#fff;display:flex;align-items:center;gap:24px;padding:0 20px;height:48px}
header .brand{font-weight:700;letter-spacing:.02em}
header nav a{color:#d6e2ee;text-decoration:none;margin-right:16px;padding:14px 0}
header nav a[aria-current=page]{color:#fff;border-bottom:3px solid #5fb0ff}
header form{margin-left:auto}
main{padding:16px 20px;max-width:1400px}
h1{font-size:20px;margin:4px 0 12px}
h2{font-size:15px;margin:20px 0 8px;color:#33404d;text-transform:uppercase;letter-spacing:.04em}
a{color:#0b5cad}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid #d8dee4}
th,td{text-align:left;padding:6px 10px;border-bottom:1px solid #e6eaee;vertical-align:top}
th{background:#eef1f4;font-weight:600;font-size:12px;color:#3b4652}
td.mono{white-space:nowrap}
td.mono,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
.muted{color:#57606a}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;border:1px solid transparent}
.p-PENDING,.p-SUBMITTING,.p-QUEUED{background:#fff4d6;color:#6b4a00;border-color:#e8cf87}
.p-RUNNING{background:#ddf4e4;color:#14532d;border-color:#9bd3ad}
.p-STOPPING{background:#e8e4fb;color:#3f2a8c;border-color:#c2b8ef}
.p-COMPLETED{background:#e7eef6;color:#1f3b5c;border-color:#b9cbe0}
.p-FAILED,.p-LOST{background:#fde2e1;color:#8a1c17;border-color:#efaaa6}
.p-CANCELLED{background:#eceff1;color:#3b4652;border-color:#c9d1d9}
.ok{color:#14532d;font-weight:600}.bad{color:#8a1c17;font-weight:600}.warn{color:#6b4a00;font-weight:600}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(220px,1fr));gap:12px;margin-bottom:8px}
.card{background:#fff;border:1px solid #d8dee4;border-radius:6px;padding:10px 14px}
a.card{text-decoration:none;color:inherit}a.card:hover{border-color:#0b5cad}
.card .label{font-size:12px;color:#57606a;text-transform:uppercase;letter-spacing:.04em}
.card .value{font-size:18px;font-weight:600;margin-top:2px}
.hint{background:#fff8e1;border-left:4px solid #d4a017;padding:8px 12px;margin:8px 0}
form.filters{display:flex;gap:12px;align-items:end;flex-wrap:wrap;margin-bottom:12px}
form.filters label{display:flex;flex-direction:column;font-size:12px;color:#3b4652}
select,input{font:inherit;padding:4px 6px;border:1px solid #8c959f;border-radius:4px;background:#fff;color:#1b1f24}
button{font:inherit;padding:5px 14px;border-radius:4px;border:1px solid #0b5cad;background:#0b5cad;color:#fff;cursor:pointer}
button.danger{background:#b42318;border-color:#b42318}
button.plain{background:transparent;border-color:#8c959f;color:#fff}
.pager{display:flex;gap:16px;margin:10px 0}
.pager a[aria-current=page]{font-weight:700;color:#1b1f24;text-decoration:none}
pre.log{background:#111820;color:#e6edf3;padding:10px;border-radius:6px;max-height:420px;overflow:auto;white-space:pre-wrap;word-break:break-all;margin:0}
.login{max-width:380px;margin:60px auto;background:#fff;border:1px solid #d8dee4;border-radius:6px;padding:20px}
.login input{width:100%;margin:6px 0 12px}
.error{color:#8a1c17}
svg.chart{background:#fff;border:1px solid #d8dee4;border-radius:6px}
.row{display:flex;gap:20px;flex-wrap:wrap}.row>*{flex:1 1 420px}
`;

// <form data-confirm="question">: asks before submitting (instead of an inline onsubmit, which the CSP refuses).
document.addEventListener("submit", function (e) {
  var form = e.target;
  if (form.dataset && form.dataset.confirm && !window.confirm(form.dataset.confirm)) e.preventDefault();
});

// A server-side form error: its summary (data-focus-on-load) takes the focus, so a screen reader reads it and
// the page scrolls to it; each item links to its field.
document.addEventListener("DOMContentLoaded", function () {
  var summary = document.querySelector("[data-focus-on-load]");
  if (summary) summary.focus();
});

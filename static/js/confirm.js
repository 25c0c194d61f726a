// <form data-confirm="question">: asks before submitting (instead of an inline onsubmit, which the CSP refuses).
document.addEventListener("submit", function (e) {
  var form = e.target;
  if (form.dataset && form.dataset.confirm && !window.confirm(form.dataset.confirm)) e.preventDefault();
});


(function () {
  var on = [];
  document.addEventListener('mouseover', function (e) {
    var g = e.target && e.target.closest ? e.target.closest('g.arrow') : null;
    on.forEach(function (x) { x.classList.remove('hl'); });
    on = [];
    if (!g || !g.dataset.psn) return;
    on = Array.prototype.slice.call(g.ownerSVGElement.querySelectorAll('g.arrow[data-psn="' + g.dataset.psn + '"]'));
    on.forEach(function (x) { x.classList.add('hl'); });
  });
})();

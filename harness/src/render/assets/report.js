
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
(function () {
  // The outcome filters: a case whose outcome is unticked is hidden, in the
  // list and in the page.
  document.addEventListener('change', function (e) {
    var box = e.target;
    if (!box.matches || !box.matches('.filters input[data-outcome]')) return;
    var all = document.querySelectorAll('[data-outcome="' + box.dataset.outcome + '"]:not(input)');
    Array.prototype.forEach.call(all, function (x) { x.classList.toggle('hidden', !box.checked); });
  });
})();

package transform

// guardSource prepares a fresh runtime before the tenant's code runs. It is
// compiled once and run in every runtime.
//
// goja checks for an interrupt between JavaScript instructions only, so a
// built-in that allocates or loops a lot in one call can neither be stopped
// nor watched. The wrappers below refuse such calls up front when their size
// is known from the arguments, or do the work in JavaScript steps that the
// watchdog can stop. They keep the originals in this closure, and their own
// arrays and descriptors have no prototype, so that a tenant who replaces a
// global or changes a prototype cannot get around the checks.
//
// Arrays are a special case: an array's length costs nothing to set, and most
// built-ins walk it. An array is handed to a built-in only when it is a real
// array (not a proxy, whose length may change between reads) no longer than
// the memory limit allows; anything else array-like is first copied, in
// JavaScript, into such an array.
const guardSource = `(function (g, host) {
'use strict';
var over = host.over, isProxy = host.isProxy, className = host.className;
var maxBytes = host.maxBytes, maxChars = host.maxChars, maxElems = host.maxElems;

var O = Object, A = Array, S = String, N = Number, R = Reflect, M = Math;
var apply = R.apply, construct = R.construct;
var defineProperty = O.defineProperty, getPrototypeOf = O.getPrototypeOf, setPrototypeOf = O.setPrototypeOf;
var ownKeys = R.ownKeys, getOwnPropertyDescriptor = O.getOwnPropertyDescriptor;
var isArray = A.isArray, floor = M.floor;
var TypeErr = TypeError;
var FP = Function.prototype, AP = A.prototype, SP = S.prototype;
var iteratorSym = Symbol.iterator;
var strIndexOf = SP.indexOf, strSlice = SP.slice, strValueOf = SP.valueOf, origJoin = AP.join;
var origStringify = JSON.stringify, origParse = JSON.parse;

function noop() {}

// list makes an array for the guards' own use. Without a prototype, no
// setter the tenant defined on Array.prototype or Object.prototype sees
// what is stored in it.
function list() {
	var a = [];
	setPrototypeOf(a, null);
	return a;
}

// plain gives a list made by list() back the array prototype, to return it.
function plain(a) {
	setPrototypeOf(a, AP);
	return a;
}

// desc is a property descriptor that inherits no field.
function desc(d) {
	setPrototypeOf(d, null);
	return d;
}

function each(items, fn) {
	for (var i = 0; i < items.length; i++) fn(items[i]);
}

// set replaces a built-in; assigning keeps the property's attributes.
function set(obj, name, fn) {
	obj[name] = fn;
}

function toInteger(v) {
	v = N(v);
	if (v !== v) return 0;
	return v < 0 ? -floor(-v) : floor(v);
}

function toLength(v) {
	v = toInteger(v);
	if (v <= 0) return 0;
	return v > 9007199254740991 ? 9007199254740991 : v;
}

function isObject(v) {
	return v !== null && (typeof v === 'object' || typeof v === 'function');
}

function genuine(o) {
	return isArray(o) && !isProxy(o);
}

// arrayOf returns o when it is a real array a built-in may walk, or else a
// copy of its elements made in steps.
function arrayOf(o, what) {
	if (o == null) throw new TypeErr(what + ' called on null or undefined');
	if (genuine(o)) {
		if (o.length > maxElems) over(what);
		return o;
	}
	o = O(o);
	var len = toLength(o.length);
	if (len > maxElems) over(what);
	var copy = list();
	for (var i = 0; i < len; i++) {
		if (i in o) copy[i] = o[i];
	}
	copy.length = len;
	return copy;
}

// Array methods that only read the array.
each(['at', 'entries', 'every', 'filter', 'find', 'findIndex', 'findLast', 'findLastIndex',
 'forEach', 'includes', 'indexOf', 'keys', 'lastIndexOf', 'map', 'reduce', 'reduceRight',
 'slice', 'some', 'toReversed', 'toSorted', 'toSpliced', 'values', 'with'], function (name) {
	var orig = AP[name];
	if (typeof orig !== 'function') return;
	var what = 'Array.prototype.' + name;
	set(AP, name, function () {
		return apply(orig, arrayOf(this, what), arguments);
	});
	if (name === 'values' && AP[iteratorSym] === orig) set(AP, iteratorSym, AP.values);
});

// Array methods that change the array: an array-like is changed through a
// copy, written back afterwards.
each(['copyWithin', 'fill', 'pop', 'push', 'reverse', 'shift', 'sort', 'splice', 'unshift'], function (name) {
	var orig = AP[name];
	if (typeof orig !== 'function') return;
	var what = 'Array.prototype.' + name;
	var setsLength = name === 'pop' || name === 'push' || name === 'shift' || name === 'unshift' || name === 'splice';
	set(AP, name, function () {
		var o = this;
		if (genuine(o)) {
			if (o.length > maxElems) over(what);
			return apply(orig, o, arguments);
		}
		var copy = arrayOf(o, what);
		var oldLen = copy.length;
		var result = apply(orig, copy, arguments);
		o = O(o);
		var i;
		for (i = 0; i < copy.length; i++) {
			if (i in copy) o[i] = copy[i];
			else delete o[i];
		}
		for (i = copy.length; i < oldLen; i++) delete o[i];
		if (setsLength) o.length = copy.length;
		return result === copy ? o : result;
	});
});

// joining holds the arrays being joined: a cycle prints as an empty string,
// as in the engines, instead of recursing without end.
var joining = list();

function joinParts(o, sep, locale, what) {
	if (o == null) throw new TypeErr(what + ' called on null or undefined');
	o = O(o);
	var len = toLength(o.length);
	for (var k = 0; k < joining.length; k++) {
		if (joining[k] === o) return '';
	}
	joining[joining.length] = o;
	try {
		var parts = list(), total = 0;
		for (var i = 0; i < len; i++) {
			var e = o[i], s;
			if (e == null) s = '';
			else if (locale) s = S(e.toLocaleString());
			else s = S(e);
			total += s.length + (i > 0 ? sep.length : 0);
			if (total > maxChars) over(what);
			parts[i] = s;
		}
		return apply(origJoin, parts, [sep]);
	} finally {
		joining.length--;
	}
}

set(AP, 'join', function (sep) {
	return joinParts(this, sep === undefined ? ',' : S(sep), false, 'Array.prototype.join');
});
set(AP, 'toLocaleString', function () {
	return joinParts(this, ',', true, 'Array.prototype.toLocaleString');
});

function flatInto(target, source, depth, mapper, thisArg, what) {
	var src = arrayOf(source, what);
	for (var i = 0, len = src.length; i < len; i++) {
		if (!(i in src)) continue;
		var e = src[i];
		if (mapper) e = apply(mapper, thisArg, [e, i, source]);
		if (depth > 0 && isArray(e)) flatInto(target, e, depth - 1, undefined, undefined, what);
		else target[target.length] = e;
	}
	return target;
}

set(AP, 'flat', function (depth) {
	return plain(flatInto(list(), this, depth === undefined ? 1 : toInteger(depth), undefined, undefined, 'Array.prototype.flat'));
});
set(AP, 'flatMap', function (fn, thisArg) {
	if (typeof fn !== 'function') throw new TypeErr('Array.prototype.flatMap: the mapper is not a function');
	return plain(flatInto(list(), this, 1, fn, thisArg, 'Array.prototype.flatMap'));
});

function spreadable(e) {
	if (!isObject(e)) return false;
	var s = e[Symbol.isConcatSpreadable];
	return s === undefined ? isArray(e) : !!s;
}

set(AP, 'concat', function () {
	if (this == null) throw new TypeErr('Array.prototype.concat called on null or undefined');
	var out = list(), n = 0;
	for (var a = -1; a < arguments.length; a++) {
		var e = a < 0 ? O(this) : arguments[a];
		if (spreadable(e)) {
			var src = arrayOf(e, 'Array.prototype.concat');
			if (n + src.length > maxElems) over('Array.prototype.concat');
			for (var k = 0; k < src.length; k++, n++) {
				if (k in src) out[n] = src[k];
			}
		} else {
			out[n++] = e;
		}
	}
	out.length = n;
	return plain(out);
});

function from(items, mapFn, thisArg) {
	if (mapFn !== undefined && typeof mapFn !== 'function') throw new TypeErr('Array.from: the mapper is not a function');
	if (items == null) throw new TypeErr('Array.from needs an iterable or array-like object');
	var out = list(), n = 0;
	var iter = items[iteratorSym];
	if (iter != null) {
		if (typeof iter !== 'function') throw new TypeErr('Array.from: Symbol.iterator is not a function');
		var iterable = {};
		iterable[iteratorSym] = function () { return apply(iter, items, []); };
		for (var v of iterable) {
			if (n >= maxElems) over('Array.from');
			out[n] = mapFn ? apply(mapFn, thisArg, [v, n]) : v;
			n++;
		}
		return plain(out);
	}
	var o = O(items);
	var len = toLength(o.length);
	if (len > maxElems) over('Array.from');
	for (; n < len; n++) out[n] = mapFn ? apply(mapFn, thisArg, [o[n], n]) : o[n];
	out.length = len;
	return plain(out);
}
set(A, 'from', from);

// guardConstructor replaces the global constructor C with one that checks
// its arguments first; the prototype is shared, so instanceof and the
// constructor property still work.
function guardConstructor(C, name, check) {
	var G = function () {
		return construct(C, check(arguments), new.target === undefined ? G : new.target);
	};
	each(ownKeys(C), function (key) {
		if (key === 'prototype' || key === 'name' || key === 'length') return;
		defineProperty(G, key, desc(getOwnPropertyDescriptor(C, key)));
	});
	setPrototypeOf(G, getPrototypeOf(C));
	defineProperty(G, 'prototype', desc({value: C.prototype, writable: false, enumerable: false, configurable: false}));
	set(C.prototype, 'constructor', G);
	defineProperty(g, name, desc({value: G, writable: true, enumerable: false, configurable: true}));
	return G;
}

var ArrayG = guardConstructor(A, 'Array', function (args) {
	if (args.length === 1 && typeof args[0] === 'number' && args[0] > maxElems && args[0] === floor(args[0])) over('Array');
	return args;
});
// Built-ins that make arrays of an array's kind look up this getter: the
// plain constructor is cheaper for them than the checking one.
defineProperty(ArrayG, Symbol.species, {get: function () { return this === ArrayG ? A : this; }, configurable: true});

function toIndexChecked(v, size, what) {
	var n = toInteger(v);
	if (n * size > maxBytes) over(what);
	return n;
}

// Typed arrays and buffers are guarded the first time the code names one of
// them: preparing them costs more than most runs take, and every way to a
// buffer starts at one of these globals. Until the guards are in place, the
// globals stay getters, so a failure leaves nothing unguarded.
var bufferNames = ['ArrayBuffer', 'SharedArrayBuffer', 'Int8Array', 'Uint8Array', 'Uint8ClampedArray',
	'Int16Array', 'Uint16Array', 'Int32Array', 'Uint32Array', 'Float16Array', 'Float32Array', 'Float64Array',
	'BigInt64Array', 'BigUint64Array'];
var rawBuffers = desc({});

function installBuffers() {
	if (rawBuffers === null) return;
	guardBuffers(rawBuffers);
	rawBuffers = null;
}

each(bufferNames, function (name) {
	var d = getOwnPropertyDescriptor(g, name);
	if (d === undefined) return;
	rawBuffers[name] = d.value;
	defineProperty(g, name, {
		get: function () {
			installBuffers();
			return g[name];
		},
		set: function (v) {
			installBuffers();
			g[name] = v;
		},
		enumerable: false,
		configurable: true
	});
});

function guardBuffers(raw) {
	var AB = raw.ArrayBuffer;
	var isView = AB.isView;
	var bufferByteLength = getOwnPropertyDescriptor(AB.prototype, 'byteLength').get;

	function isBuffer(v) {
		try {
			apply(bufferByteLength, v, []);
			return true;
		} catch (e) {
			return false;
		}
	}

	each(['ArrayBuffer', 'SharedArrayBuffer'], function (name) {
		if (typeof raw[name] !== 'function') return;
		guardConstructor(raw[name], name, function (args) {
			return [toIndexChecked(args[0], 1, name), args[1]];
		});
	});

	each(bufferNames, function (name) {
		var C = raw[name];
		if (typeof C !== 'function' || name === 'ArrayBuffer' || name === 'SharedArrayBuffer') return;
		var size = C.BYTES_PER_ELEMENT;
		guardConstructor(C, name, function (args) {
			var first = args[0];
			if (!isObject(first)) {
				first = toIndexChecked(first, size, name);
			} else if (!isView(first) && !isBuffer(first)) {
				first = from(first);
				if (first.length * size > maxBytes) over(name);
			}
			return [first, args[1], args[2]];
		});
	});

	var TypedArray = getPrototypeOf(raw.Uint8Array);
	set(TypedArray, 'from', function (source, mapFn, thisArg) {
		return new this(from(source, mapFn, thisArg));
	});
	set(TypedArray.prototype, 'join', function (sep) {
		return joinParts(this, sep === undefined ? ',' : S(sep), false, 'TypedArray.prototype.join');
	});
}

// Calls with a list of arguments: the list is made from the array-like once.
function argList(a, what) {
	if (a == null) return [];
	if (!isObject(a)) throw new TypeErr(what + ': the arguments are not an array-like object');
	return arrayOf(a, what);
}

set(FP, 'apply', function (thisArg, args) {
	if (typeof this !== 'function') throw new TypeErr('Function.prototype.apply was called on a value that is not a function');
	return apply(this, thisArg, argList(args, 'Function.prototype.apply'));
});

set(R, 'apply', function (target, thisArg, args) {
	if (!isObject(args)) throw new TypeErr('Reflect.apply: the arguments are not an array-like object');
	return apply(target, thisArg, argList(args, 'Reflect.apply'));
});
set(R, 'construct', function (target, args, newTarget) {
	if (!isObject(args)) throw new TypeErr('Reflect.construct: the arguments are not an array-like object');
	var argv = argList(args, 'Reflect.construct');
	return arguments.length < 3 ? construct(target, argv) : construct(target, argv, newTarget);
});

function thisString(v, what) {
	if (v == null) throw new TypeErr('String.prototype.' + what + ' called on null or undefined');
	return S(v);
}

var origRepeat = SP.repeat;
set(SP, 'repeat', function (count) {
	var s = thisString(this, 'repeat');
	var n = toInteger(count);
	if (n > 0 && n !== Infinity && s.length * n > maxChars) over('String.prototype.repeat');
	return apply(origRepeat, s, [n]);
});

each(['padStart', 'padEnd'], function (name) {
	var orig = SP[name];
	set(SP, name, function (maxLength, fill) {
		var s = thisString(this, name);
		var n = toLength(maxLength);
		var f = fill === undefined ? undefined : S(fill);
		if (n > s.length && n > maxChars && f !== '') over('String.prototype.' + name);
		return apply(orig, s, [n, f]);
	});
});

var origConcat = SP.concat;
set(SP, 'concat', function () {
	var s = thisString(this, 'concat');
	var total = s.length, rest = list();
	for (var i = 0; i < arguments.length; i++) {
		rest[i] = S(arguments[i]);
		total += rest[i].length;
		if (total > maxChars) over('String.prototype.concat');
	}
	return apply(origConcat, s, rest);
});

set(S, 'raw', function (template) {
	var raw = arrayOf(O(O(template).raw), 'String.raw');
	var parts = list(), total = 0, n = 0;
	for (var i = 0; i < raw.length; i++) {
		var s = S(raw[i]);
		parts[n++] = s;
		total += s.length;
		if (i + 1 < raw.length && i + 1 < arguments.length) {
			var sub = S(arguments[i + 1]);
			parts[n++] = sub;
			total += sub.length;
		}
		if (total > maxChars) over('String.raw');
	}
	return apply(origJoin, parts, ['']);
});

// A replacement string is copied for every match, and may copy the whole
// input for each ($\x60 and $'): when that could go over the limit, it is
// expanded by a function, one match at a time.
function needsSteps(s, r) {
	var per = r.length;
	if (apply(strIndexOf, r, ['$']) >= 0) per += 2 * s.length;
	return (s.length + 1) * per > maxChars;
}

function expander(r) {
	return function () {
		return substitute(r, arguments);
	};
}

function substitute(r, args) {
	var n = args.length, groups;
	if (typeof args[n - 1] !== 'string') {
		groups = args[n - 1];
		n--;
	}
	var str = args[n - 1], pos = args[n - 2], m = args[0], caps = n - 3;
	var out = list(), k = 0, i = 0, len = r.length;
	function capture(c) {
		return args[c] === undefined ? '' : S(args[c]);
	}
	while (i < len) {
		var c = r[i];
		if (c !== '$' || i + 1 >= len) {
			out[k++] = c;
			i++;
			continue;
		}
		var d = r[i + 1];
		if (d === '$') {
			out[k++] = '$';
			i += 2;
		} else if (d === '&') {
			out[k++] = m;
			i += 2;
		} else if (d === '\x60') {
			out[k++] = apply(strSlice, str, [0, pos]);
			i += 2;
		} else if (d === "'") {
			out[k++] = apply(strSlice, str, [pos + m.length]);
			i += 2;
		} else if (d >= '0' && d <= '9') {
			var e = r[i + 2];
			var two = (e !== undefined && e >= '0' && e <= '9') ? N(d + e) : 0;
			var one = N(d);
			if (two >= 1 && two <= caps) {
				out[k++] = capture(two);
				i += 3;
			} else if (one >= 1 && one <= caps) {
				out[k++] = capture(one);
				i += 2;
			} else {
				out[k++] = '$';
				i++;
			}
		} else if (d === '<' && groups !== undefined) {
			var close = apply(strIndexOf, r, ['>', i + 2]);
			if (close < 0) {
				out[k++] = '$<';
				i += 2;
			} else {
				var v = groups[apply(strSlice, r, [i + 2, close])];
				if (v !== undefined) out[k++] = S(v);
				i = close + 1;
			}
		} else {
			out[k++] = '$';
			i++;
		}
	}
	return apply(origJoin, out, ['']);
}

each(['replace', 'replaceAll'], function (name) {
	var orig = SP[name];
	if (typeof orig !== 'function') return;
	set(SP, name, function (pattern, replacement) {
		var s = thisString(this, name);
		if (typeof replacement === 'function') return apply(orig, s, [pattern, replacement]);
		var r = S(replacement);
		return apply(orig, s, [pattern, needsSteps(s, r) ? expander(r) : r]);
	});
});

var RP = RegExp.prototype, origSymReplace = RP[Symbol.replace];
set(RP, Symbol.replace, function (string, replacement) {
	var s = S(string);
	if (typeof replacement === 'function') return apply(origSymReplace, this, [s, replacement]);
	var r = S(replacement);
	return apply(origSymReplace, this, [s, needsSteps(s, r) ? expander(r) : r]);
});

// A string's characters become properties one by one, each a few objects:
// refuse a string long enough for that to go over the limit.
each(['keys', 'values', 'entries', 'getOwnPropertyNames', 'getOwnPropertyDescriptors'], function (name) {
	var orig = O[name];
	if (typeof orig !== 'function') return;
	set(O, name, function (o) {
		if (typeof o === 'string' || className(o) === 'String') {
			var len = typeof o === 'string' ? o.length : apply(strValueOf, o, []).length;
			if (len * 64 > maxBytes) over('Object.' + name);
		}
		return apply(orig, O, arguments);
	});
});

// JSON.stringify walks the value in one call. A replacer function, even one
// that changes nothing, makes each value a step the watchdog can stop; an
// array of property names is applied by the same function.
function propertyList(names) {
	var keys = list();
	for (var i = 0; i < names.length; i++) {
		var v = names[i], key;
		if (typeof v === 'string') key = v;
		else if (typeof v === 'number' || (isObject(v) && (v instanceof S || v instanceof N))) key = S(v);
		else continue;
		var seen = false;
		for (var j = 0; j < keys.length; j++) if (keys[j] === key) seen = true;
		if (!seen) keys[keys.length] = key;
	}
	return keys;
}

function stringify(value, replacer, space) {
	var fn;
	if (typeof replacer === 'function') {
		fn = function (k, v) { return apply(replacer, this, [k, v]); };
	} else if (isArray(replacer)) {
		var keys = propertyList(arrayOf(replacer, 'JSON.stringify'));
		fn = function (k, v) {
			if (!isObject(v) || typeof v === 'function' || isArray(v)) return v;
			var picked = {};
			for (var i = 0; i < keys.length; i++) {
				var x = v[keys[i]];
				if (x !== undefined) defineProperty(picked, keys[i], desc({value: x, writable: true, enumerable: true, configurable: true}));
			}
			return picked;
		};
	} else {
		fn = function (k, v) { return v; };
	}
	var outer = serializing;
	serializing = false;
	try {
		return apply(origStringify, undefined, [value, fn, space]);
	} finally {
		serializing = outer;
	}
}
set(JSON, 'stringify', stringify);

// No code from strings: eval and every way to the Function constructor.
delete g.eval;
each([FP, getPrototypeOf(function* () {}), getPrototypeOf(async function () {})], function (p) {
	delete p.constructor;
});
delete g.Function;

var console = {};
each(['log', 'info', 'warn', 'error', 'debug', 'trace'], function (name) { set(console, name, noop); });
set(g, 'console', console);

// A JSON object body is parsed only when the transform looks into it. The host gives it as a proxy with
// lazyHandler over target, an empty object holding raw under rawSym: its first trap parses raw into target, and every trap forwards to target, so
// that it behaves as the parsed object would. While the host serializes the result, an untouched body
// serializes as a marker that the host replaces with raw itself, which spares parsing and serializing a
// body that a transform only moves.
//
// A pending target holds its raw text under a symbol no tenant code can name, and only until its first
// trap, which takes it off before anything else sees the target.
var rawSym = host.rawSym;
var rGet = R.get, rSet = R.set, rHas = R.has, rDeleteProperty = R.deleteProperty, rDefineProperty = R.defineProperty;
var rGetOwnPropertyDescriptor = R.getOwnPropertyDescriptor, rGetPrototypeOf = R.getPrototypeOf;
var rSetPrototypeOf = R.setPrototypeOf, rIsExtensible = R.isExtensible, rPreventExtensions = R.preventExtensions;
var touched = host.touched, marker = host.marker;
// serializing is true while serialize runs, and false again inside any JSON.stringify the tenant's code
// calls meanwhile (from a toJSON or a getter), which must see the body itself.
var serializing = false;
var markerFn = function () { return marker; };
function real(t) {
	var raw = t[rawSym];
	if (raw !== undefined) {
		delete t[rawSym];
		touched(t);
		var v = origParse(raw), keys = ownKeys(v);
		for (var i = 0; i < keys.length; i++) defineProperty(t, keys[i], desc(getOwnPropertyDescriptor(v, keys[i])));
	}
	return t;
}
// While the host serializes, a parsed body that has no toJSON of its own serializes as its target, without
// a trap for each of its properties.
var lazyHandler = desc({
	get: function (t, k, r) {
		if (k === 'toJSON' && serializing) {
			if (t[rawSym] !== undefined) return markerFn;
			var own = rGet(t, k, r);
			return own !== undefined ? own : function () { return t; };
		}
		return rGet(real(t), k, r);
	},
	set: function (t, k, v, r) { return rSet(real(t), k, v, r); },
	has: function (t, k) { return rHas(real(t), k); },
	deleteProperty: function (t, k) { return rDeleteProperty(real(t), k); },
	defineProperty: function (t, k, d) { return rDefineProperty(real(t), k, d); },
	getOwnPropertyDescriptor: function (t, k) { return rGetOwnPropertyDescriptor(real(t), k); },
	ownKeys: function (t) { return ownKeys(real(t)); },
	getPrototypeOf: function (t) { return rGetPrototypeOf(real(t)); },
	setPrototypeOf: function (t, p) { return rSetPrototypeOf(real(t), p); },
	isExtensible: function (t) { return rIsExtensible(real(t)); },
	preventExtensions: function (t) { return rPreventExtensions(real(t)); }
});

// serialize is stringify for the host's result, with the host's replacer: it is called for every value,
// which lets a stopped run end mid-way, and it takes long strings out to be quoted by the host.
function serialize(value, replacer) {
	serializing = true;
	try {
		return origStringify(value, replacer);
	} finally {
		serializing = false;
	}
}

return {stringify: stringify, serialize: serialize, parse: origParse, proxy: Proxy, lazyHandler: lazyHandler};
})`
